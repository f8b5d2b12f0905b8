// SET_ROWS: dst[i0, src1[i01, i02 % n1, i03 % n2], i02, i03] = src0[i0, i01, i02, i03].
// Indices outside dst's rows are skipped.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.src0.ne)) { return; }
    let c = unravel(i, p.src0.ne);
    let r = src1_ldi(src1_at(vec4<u32>(c.y, c.z % p.src1.ne.y, c.w % p.src1.ne.z, 0u)));
    if (r < 0 || u32(r) >= p.dst.ne.y) { return; }
    dst_st(dst_at(vec4<u32>(c.x, u32(r), c.z, c.w)), src0_ld(src0_at(c)));
}
