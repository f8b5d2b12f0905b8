// deq8 for Q5_K (ggml block_q5_K, 176 bytes: f16 d, f16 dmin, 12 bytes of
// 6-bit scales and mins packed as Q4_K's, 32 bytes of fifth bits qh, 128
// bytes of nibbles). As Q4_K (`scale_min_k4` included), with bit (2g + hi) of
// qh[l % 32] as the fifth bit.

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 256u) * 176u;
    let j = k % 256u;
    let g = j / 64u;
    let l = j % 64u;
    let hi = select(0u, 1u, l >= 32u);
    let sm = scale_min_k4(blk, 2u * g + hi);
    let d = src0_f16(blk) * sm.x;
    let m = src0_f16(blk + 2u) * sm.y;
    let q = blk + 48u + g * 32u + (l % 32u);
    let h = blk + 16u + (l % 32u);
    let shift = hi * 4u;
    let bit = 2u * g + hi;
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    let h0 = src0_u32(h);
    let h1 = src0_u32(h + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        let b0 = ((h0 >> (8u * t + bit)) & 1u) << 4u;
        let b1 = ((h1 >> (8u * t + bit)) & 1u) << 4u;
        out[t] = d * f32(((w0 >> (8u * t + shift)) & 0xfu) | b0) - m;
        out[t + 4u] = d * f32(((w1 >> (8u * t + shift)) & 0xfu) | b1) - m;
    }
    return out;
}
