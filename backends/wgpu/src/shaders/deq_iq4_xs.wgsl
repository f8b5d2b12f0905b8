// deq8 for IQ4_XS (ggml block_iq4_xs, 136 bytes: f16 d, u16 scales_h,
// 4 bytes scales_l, 128 bytes of nibbles). Each sub-block of 32 has a
// 6-bit scale (4 low bits from scales_l, 2 high from scales_h) minus 32;
// its elements are KVALUES_IQ4NL[nibble] times d · scale, the nibbles of
// its 16 bytes ordered as IQ4_NL's.

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 256u) * 136u;
    let j = k % 256u;
    let ib = j / 32u;
    let low = (src0_u8(blk + 4u + ib / 2u) >> (4u * (ib % 2u))) & 0xfu;
    let high = (src0_u16(blk + 2u) >> (2u * ib)) & 3u;
    let dl = src0_f16(blk) * f32(i32(low | (high << 4u)) - 32);
    let l = j % 32u;
    let q = blk + 8u + 16u * ib + (l % 16u);
    let shift = select(0u, 4u, l >= 16u);
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        out[t] = dl * KVALUES_IQ4NL[(w0 >> (8u * t + shift)) & 0xfu];
        out[t + 4u] = dl * KVALUES_IQ4NL[(w1 >> (8u * t + shift)) & 0xfu];
    }
    return out;
}
