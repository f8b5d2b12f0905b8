// ROPE, one invocation per pair of elements of a row. Positions are src1
// (I32, one per ne2); `freq_factor(j)` divides pair j's angle (1 without factors).
// p.u = (n_dims, neox), p.f = (log2 freq_base, freq_scale, ext_factor, corr_low),
// p.f2 = (corr_high, mscale). In NORMAL mode pair j is (2j, 2j+1); in NEOX mode it
// is (j, j + n_dims/2). Elements past n_dims are copied.

fn rope_pair(a: vec2<u32>, b: vec2<u32>, x0: f32, x1: f32, j: u32, pos: f32) {
    let n_dims = p.u.x;
    let theta_extrap = pos * exp2(-p.f.x * f32(2u * j) / f32(n_dims)) / freq_factor(j);
    let theta_interp = p.f.y * theta_extrap;
    var theta = theta_interp;
    if (p.f.z != 0.0) {
        let y = (f32(j) - p.f.w) / max(0.001, p.f2.x - p.f.w);
        let ramp = (1.0 - min(1.0, max(0.0, y))) * p.f.z;
        theta = theta_interp * (1.0 - ramp) + theta_extrap * ramp;
    }
    let c = cos(theta) * p.f2.y;
    let s = sin(theta) * p.f2.y;
    dst_st(b.x, x0 * c - x1 * s);
    dst_st(b.y, x0 * s + x1 * c);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    let pairs = (p.dst.ne.x + 1u) / 2u;
    let shape = vec4<u32>(pairs, p.dst.ne.y, p.dst.ne.z, p.dst.ne.w);
    if (i >= n_elements(shape)) { return; }
    let c = unravel(i, shape);
    let j = c.x;
    let n_dims = p.u.x;
    let neox = p.u.y != 0u;
    var e0 = 2u * j;
    var e1 = 2u * j + 1u;
    if (neox && j < n_dims / 2u) { e0 = j; e1 = j + n_dims / 2u; }
    let s0 = src0_at(vec4<u32>(e0, c.y, c.z, c.w));
    let s1 = src0_at(vec4<u32>(e1, c.y, c.z, c.w));
    let d0 = dst_at(vec4<u32>(e0, c.y, c.z, c.w));
    let d1 = dst_at(vec4<u32>(e1, c.y, c.z, c.w));
    let x0 = src0_ld(s0);
    if (2u * j >= n_dims) {
        // Past the rotated dimensions: copy (the last element of an odd row alone).
        dst_st(d0, x0);
        if (e1 < p.dst.ne.x) { dst_st(d1, src0_ld(s1)); }
        return;
    }
    let pos = f32(src1_ldi(src1_at(vec4<u32>(c.z, 0u, 0u, 0u))));
    rope_pair(vec2<u32>(s0, s1), vec2<u32>(d0, d1), x0, src0_ld(s1), j, pos);
}
