// deq8 for Q4_1 (ggml block_q4_1, 20 bytes: f16 d, f16 m, 16 bytes of nibbles).
// Element j is nibble j times d plus m.

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 32u) * 20u;
    let d = src0_f16(blk);
    let m = src0_f16(blk + 2u);
    let j = k % 32u;
    let q = blk + 4u + (j % 16u);
    let shift = select(0u, 4u, j >= 16u);
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        out[t] = f32((w0 >> (8u * t + shift)) & 0xfu) * d + m;
        out[t + 4u] = f32((w1 >> (8u * t + shift)) & 0xfu) * d + m;
    }
    return out;
}
