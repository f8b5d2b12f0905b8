// deq8 for MXFP4 (ggml block_mxfp4, 17 bytes: an E8M0 exponent, 16 bytes of
// FP4 nibbles). Blocks sit at any byte, so only byte-safe loads are used.
// Element j is KVALUES_MXFP4[nibble j] times half the exponent's power of
// two (ggml's e8m0_to_fp32_half, exact), nibbles ordered as Q4_0's.

var<private> KVALUES_MXFP4: array<f32, 16> = array<f32, 16>(
    0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);

fn e8m0_half(e: u32) -> f32 {
    // Below 2 the half is subnormal: 2^-128 (0x00200000) or 2^-127.
    return bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
}

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 32u) * 17u;
    let d = e8m0_half(src0_u8(blk));
    let j = k % 32u;
    let q = blk + 1u + (j % 16u);
    let shift = select(0u, 4u, j >= 16u);
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        out[t] = KVALUES_MXFP4[(w0 >> (8u * t + shift)) & 0xfu] * d;
        out[t + 4u] = KVALUES_MXFP4[(w1 >> (8u * t + shift)) & 0xfu] * d;
    }
    return out;
}
