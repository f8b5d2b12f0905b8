// deq8 for IQ4_NL (ggml block_iq4_nl, 18 bytes: f16 d, 16 bytes of nibbles).
// Element j of a block is KVALUES_IQ4NL[nibble j] times d, the nibbles
// ordered as Q4_0's (low halves first, then high halves).

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 32u) * 18u;
    let d = src0_f16(blk);
    let j = k % 32u;
    let q = blk + 2u + (j % 16u);
    let shift = select(0u, 4u, j >= 16u);
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        out[t] = d * KVALUES_IQ4NL[(w0 >> (8u * t + shift)) & 0xfu];
        out[t + 4u] = d * KVALUES_IQ4NL[(w1 >> (8u * t + shift)) & 0xfu];
    }
    return out;
}
