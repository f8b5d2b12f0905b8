// DIAG_MASK_INF: -inf where column i0 > n_past (p.u.x) + row i1, else src0.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    var v = src0_ld(src0_at(c));
    if (c.x > p.u.x + c.y) { v = bitcast<f32>(0xff800000u); }
    dst_st(dst_at(c), v);
}
