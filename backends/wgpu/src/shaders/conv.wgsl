// The direct convolutions: one invocation per result element, summing in
// the order the CPU does. CONV_OP (from the plan): 0 CONV_2D, 1 CONV_2D_DW,
// 2 CONV_TRANSPOSE_1D, 3 CONV_TRANSPOSE_2D. src0 is the kernel, src1 the
// image (or input). u: stride 0 and 1, padding 0 and 1; u2: dilation 0 and
// 1 (a transposed convolution's one stride is u.x).
// CONV_2D:    kernel [kw, kh, ic, oc], image [iw, ih, ic, n] -> [ow, oh, oc, n]
// CONV_2D_DW: kernel [kw, kh, 1, c],   image [iw, ih, c, n]  -> [ow, oh, c, n]
// CONV_TRANSPOSE_1D: kernel [kw, oc, ic], input [iw, ic]      -> [ow, oc]
// CONV_TRANSPOSE_2D: kernel [kw, kh, oc, ic], input [iw, ih, ic, n] -> [ow, oh, oc, n]

// The input position output `o` reads through kernel tap `k` along `dim`,
// or -1 in the padding.
fn tap(o: u32, k: u32, dim: u32, len: u32) -> i32 {
    let at = i32(o * p.u[dim] + k * p.u2[dim]) - i32(p.u[2u + dim]);
    return select(-1, at, at >= 0 && u32(at) < len);
}

fn conv_2d(c: vec4<u32>, depthwise: bool) -> f32 {
    let kw = p.src0.ne.x;
    let kh = p.src0.ne.y;
    var c0 = 0u;
    var c1 = p.src1.ne.z;
    if (depthwise) { c0 = c.z; c1 = c.z + 1u; }
    var sum = 0.0;
    for (var ch = c0; ch < c1; ch++) {
        let kc = select(ch, 0u, depthwise);
        for (var ky = 0u; ky < kh; ky++) {
            let sy = tap(c.y, ky, 1u, p.src1.ne.y);
            if (sy < 0) { continue; }
            for (var kx = 0u; kx < kw; kx++) {
                let sx = tap(c.x, kx, 0u, p.src1.ne.x);
                if (sx < 0) { continue; }
                let w = src0_ld(src0_at(vec4<u32>(kx, ky, kc, c.z)));
                sum += w * src1_ld(src1_at(vec4<u32>(u32(sx), u32(sy), ch, c.w)));
            }
        }
    }
    return sum;
}

// Input index `(o - k) / s` when it is a whole one inside `len`, else -1.
fn source_of(o: u32, k: u32, s: u32, len: u32) -> i32 {
    if (k > o || (o - k) % s != 0u || (o - k) / s >= len) { return -1; }
    return i32((o - k) / s);
}

fn conv_transpose_1d(c: vec4<u32>) -> f32 {
    let s = p.u.x;
    var sum = 0.0;
    for (var ch = 0u; ch < p.src1.ne.y; ch++) {
        for (var k = 0u; k < p.src0.ne.x; k++) {
            let ix = source_of(c.x, k, s, p.src1.ne.x);
            if (ix < 0) { continue; }
            sum += src0_ld(src0_at(vec4<u32>(k, c.y, ch, 0u))) * src1_ld(src1_at(vec4<u32>(u32(ix), ch, 0u, 0u)));
        }
    }
    return sum;
}

fn conv_transpose_2d(c: vec4<u32>) -> f32 {
    let s = p.u.x;
    var sum = 0.0;
    for (var ky = 0u; ky < p.src0.ne.y; ky++) {
        let iy = source_of(c.y, ky, s, p.src1.ne.y);
        if (iy < 0) { continue; }
        for (var ch = 0u; ch < p.src1.ne.z; ch++) {
            for (var kx = 0u; kx < p.src0.ne.x; kx++) {
                let ix = source_of(c.x, kx, s, p.src1.ne.x);
                if (ix < 0) { continue; }
                let w = src0_ld(src0_at(vec4<u32>(kx, ky, c.z, ch)));
                sum += w * src1_ld(src1_at(vec4<u32>(u32(ix), u32(iy), ch, c.w)));
            }
        }
    }
    return sum;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    var v = 0.0;
    switch (CONV_OP) {
        case 0u: { v = conv_2d(c, false); }
        case 1u: { v = conv_2d(c, true); }
        case 2u: { v = conv_transpose_1d(c); }
        default: { v = conv_transpose_2d(c); }
    }
    dst_st(dst_at(c), v);
}
