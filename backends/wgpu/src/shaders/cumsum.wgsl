// CUMSUM: one invocation per row adds the row up in order (the sums are
// sequential by definition; rows are many where it matters).

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let r = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    let rows = p.src0.ne.y * p.src0.ne.z * p.src0.ne.w;
    if (r >= rows) { return; }
    let c = unravel(r, vec4<u32>(p.src0.ne.y, p.src0.ne.z, p.src0.ne.w, 1u));
    let src = src0_at(vec4<u32>(0u, c.x, c.y, c.z));
    let dst = dst_at(vec4<u32>(0u, c.x, c.y, c.z));
    var acc = 0.0;
    for (var i = 0u; i < p.src0.ne.x; i++) {
        acc += src0_ld(src + i * p.src0.nb.x);
        dst_st(dst + i * p.dst.nb.x, acc);
    }
}
