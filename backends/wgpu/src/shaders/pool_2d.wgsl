// POOL_2D and POOL_1D: one invocation per result element. u: k0, k1, s0,
// s1; u2: p0, p1, op (0 max, 1 average), 1-D (a window of one row: k1 = s1
// = 1, p1 = 0). Max starts at -f32::MAX (what a window of padding only
// gives); POOL_2D's average divides by the whole window, POOL_1D's by the
// taps inside the input (0 for none), as ggml's.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let is_max = p.u2.z == 0u;
    var res = select(0.0, -3.40282347e+38, is_max);
    var inside = 0u;
    let ix = i32(c.x * p.u.z) - i32(p.u2.x);
    let iy = i32(c.y * p.u.w) - i32(p.u2.y);
    for (var ky = 0u; ky < p.u.y; ky++) {
        let y = iy + i32(ky);
        if (y < 0 || u32(y) >= p.src0.ne.y) { continue; }
        for (var kx = 0u; kx < p.u.x; kx++) {
            let x = ix + i32(kx);
            if (x < 0 || u32(x) >= p.src0.ne.x) { continue; }
            let v = src0_ld(src0_at(vec4<u32>(u32(x), u32(y), c.z, c.w)));
            res = select(res + v, max(res, v), is_max);
            inside += 1u;
        }
    }
    if (!is_max && p.u2.w == 0u) { res /= f32(p.u.x * p.u.y); }
    if (!is_max && p.u2.w != 0u) { res = select(0.0, res / f32(inside), inside > 0u); }
    dst_st(dst_at(c), res);
}
