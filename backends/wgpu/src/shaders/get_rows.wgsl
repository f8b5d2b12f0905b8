// GET_ROWS for plain dtypes: dst[i0, i10, i11, i12] = src0[i0, src1[i10, i11, i12], i11, i12].
// Indices outside src0's rows give zeros (a kernel cannot report an error).

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let r = src1_ldi(src1_at(vec4<u32>(c.y, c.z, c.w, 0u)));
    let d = dst_at(c);
    if (r < 0 || u32(r) >= p.src0.ne.y) { zero0(d); return; }
    mov0(d, src0_at(vec4<u32>(c.x, u32(r), c.z, c.w)));
}
