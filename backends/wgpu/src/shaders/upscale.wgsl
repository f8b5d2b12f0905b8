// UPSCALE: one invocation per result element, with ggml's f32 index
// arithmetic. f: the scale of each dim; f2.x: the pixel offset (0.5, or 0
// with aligned corners); u.x: 0 nearest, 1 bilinear (dims 0 and 1).

fn nearest(i: u32, sf: f32, n: u32) -> u32 {
    return min(u32(f32(i) / sf), n - 1u);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let ne = p.src0.ne;
    let j2 = nearest(c.z, p.f.z, ne.z);
    let j3 = nearest(c.w, p.f.w, ne.w);
    var v = 0.0;
    if (p.u.x == 0u) {
        v = src0_ld(src0_at(vec4<u32>(nearest(c.x, p.f.x, ne.x), nearest(c.y, p.f.y, ne.y), j2, j3)));
    } else {
        let off = p.f2.x;
        let x = (f32(c.x) + off) / p.f.x - off;
        let y = (f32(c.y) + off) / p.f.y - off;
        let fx = i32(floor(x));
        let fy = i32(floor(y));
        let x0 = u32(clamp(fx, 0, i32(ne.x) - 1));
        let x1 = u32(clamp(fx + 1, 0, i32(ne.x) - 1));
        let y0 = u32(clamp(fy, 0, i32(ne.y) - 1));
        let y1 = u32(clamp(fy + 1, 0, i32(ne.y) - 1));
        let dx = clamp(x - f32(x0), 0.0, 1.0);
        let dy = clamp(y - f32(y0), 0.0, 1.0);
        let a = src0_ld(src0_at(vec4<u32>(x0, y0, j2, j3)));
        let b = src0_ld(src0_at(vec4<u32>(x1, y0, j2, j3)));
        let cc = src0_ld(src0_at(vec4<u32>(x0, y1, j2, j3)));
        let d = src0_ld(src0_at(vec4<u32>(x1, y1, j2, j3)));
        v = a * (1.0 - dx) * (1.0 - dy) + b * dx * (1.0 - dy) + cc * (1.0 - dx) * dy + d * dx * dy;
    }
    dst_st(dst_at(c), v);
}
