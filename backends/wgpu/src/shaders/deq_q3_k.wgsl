// deq8 for Q3_K (ggml block_q3_K, 110 bytes: 32 bytes of high bits hmask,
// 64 bytes of 2-bit quants, 12 bytes of packed 6-bit scales, f16 d). Layout
// as Q2_K's; the third bit is bit (4n + j) of hmask[16 half + l], and a clear
// bit subtracts 4. Scale i has its low 4 bits in nibble i / 8 of byte i % 8
// and its high 2 bits in bits 2 (i / 4) of byte 8 + i % 4; it is stored + 32.

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 256u) * 110u;
    let e = k % 256u;
    let n = e / 128u;
    let r = e % 128u;
    let j = r / 32u;
    let half = (r % 32u) / 16u;
    let l = r % 16u;
    let i = n * 8u + j * 2u + half;
    let lo = (src0_u8(blk + 96u + i % 8u) >> (4u * (i / 8u))) & 0xfu;
    let hi = (src0_u8(blk + 104u + i % 4u) >> (2u * (i / 4u))) & 3u;
    let d = src0_f16(blk + 108u) * (f32(lo | (hi << 4u)) - 32.0);
    let q = blk + 32u + n * 32u + half * 16u + l;
    let hm = blk + half * 16u + l;
    let shift = 2u * j;
    let bit = 4u * n + j;
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    let m0 = src0_u32(hm);
    let m1 = src0_u32(hm + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        let s0 = select(4.0, 0.0, ((m0 >> (8u * t + bit)) & 1u) != 0u);
        let s1 = select(4.0, 0.0, ((m1 >> (8u * t + bit)) & 1u) != 0u);
        out[t] = d * (f32((w0 >> (8u * t + shift)) & 3u) - s0);
        out[t + 4u] = d * (f32((w1 >> (8u * t + shift)) & 3u) - s1);
    }
    return out;
}
