// ADD_ID: dst[i, e, t] = src0[i, e, t] + src1[i, ids[e, t]] (ids in src2).
// An id outside src1's rows reads nothing and writes NaN.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let id = src2_ldi(src2_at(vec4<u32>(c.y, c.z, 0u, 0u)));
    if (id < 0 || u32(id) >= p.src1.ne.y) {
        dst_st(dst_at(c), bitcast<f32>(0x7fc00000u));
        return;
    }
    dst_st(dst_at(c), src0_ld(src0_at(c)) + src1_ld(src1_at(vec4<u32>(c.x, u32(id), 0u, 0u))));
}
