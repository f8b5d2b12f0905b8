// deq8 for Q5_1 (ggml block_q5_1, 24 bytes: f16 d, f16 m, 32 high bits qh,
// 16 bytes of nibbles). Element j is the 5-bit value (as Q5_0) times d plus m.

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 32u) * 24u;
    let d = src0_f16(blk);
    let m = src0_f16(blk + 2u);
    let qh = src0_u32(blk + 4u);
    let j = k % 32u;
    let q = blk + 8u + (j % 16u);
    let shift = select(0u, 4u, j >= 16u);
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        let h0 = ((qh >> (j + t)) & 1u) << 4u;
        let h1 = ((qh >> (j + t + 4u)) & 1u) << 4u;
        out[t] = f32(((w0 >> (8u * t + shift)) & 0xfu) | h0) * d + m;
        out[t + 4u] = f32(((w1 >> (8u * t + shift)) & 0xfu) | h1) * d + m;
    }
    return out;
}
