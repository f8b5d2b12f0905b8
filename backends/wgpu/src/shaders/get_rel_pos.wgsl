// GET_REL_POS (SAM): one invocation per result element,
// `out[c, k, q] = a[c, kh - 1 - k + q]` with kh = dst.ne.y (F16 through
// f32, exact). The plan checked that the table has 2 · kh - 1 rows.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let row = p.dst.ne.y - 1u - c.y + c.z;
    dst_st(dst_at(c), src0_ld(src0_at(vec4<u32>(c.x, row, 0u, 0u))));
}
