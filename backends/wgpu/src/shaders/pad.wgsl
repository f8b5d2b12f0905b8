// PAD: one invocation per result element. u: the padding before each dim;
// u2.x: circular (the source wrapped around) instead of zeros.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let s = vec4<i32>(c) - vec4<i32>(p.u);
    let n = vec4<i32>(p.src0.ne);
    var v = 0.0;
    if (p.u2.x != 0u) {
        v = src0_ld(src0_at(vec4<u32>(((s % n) + n) % n)));
    } else if (all(s >= vec4<i32>(0)) && all(s < n)) {
        v = src0_ld(src0_at(vec4<u32>(s)));
    }
    dst_st(dst_at(c), v);
}
