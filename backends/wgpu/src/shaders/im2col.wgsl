// IM2COL: one invocation per result element. The result row (c.x) is
// channel, kernel row, kernel column; the image is src1 (src0, the kernel,
// only sets the shape). u: s0, s1, p0, p1; u2: d0, d1, KW, KH. IS_2D: the
// image is [W, H, C, N] and the result [C·KH·KW, OW, OH, N]; else [L, C, N]
// and [C·KW, OL, N].

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let kw = p.u2.z;
    let kh = p.u2.w;
    let kx = c.x % kw;
    let ky = (c.x / kw) % kh;
    let ch = c.x / (kw * kh);
    let x = i32(c.y * p.u.x + kx * p.u2.x) - i32(p.u.z);
    var v = 0.0;
    if (IS_2D) {
        let y = i32(c.z * p.u.y + ky * p.u2.y) - i32(p.u.w);
        if (x >= 0 && u32(x) < p.src1.ne.x && y >= 0 && u32(y) < p.src1.ne.y) {
            v = src1_ld(src1_at(vec4<u32>(u32(x), u32(y), ch, c.w)));
        }
    } else if (x >= 0 && u32(x) < p.src1.ne.x) {
        v = src1_ld(src1_at(vec4<u32>(u32(x), ch, c.z, 0u)));
    }
    dst_st(dst_at(c), v);
}
