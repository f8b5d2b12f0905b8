// deq8 for Q2_K (ggml block_q2_K, 84 bytes: 16 bytes of 4-bit scale/min
// pairs, 64 bytes of 2-bit quants, f16 d, f16 dmin). Each half of 128
// elements reads 32 quant bytes four times (bits 2j..2j+1); each 16 elements
// have their own scale (low nibble, times d) and min (high nibble, times dmin).

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 256u) * 84u;
    let e = k % 256u;
    let n = e / 128u;
    let r = e % 128u;
    let j = r / 32u;
    let half = (r % 32u) / 16u;
    let l = r % 16u;
    let sc = src0_u8(blk + n * 8u + j * 2u + half);
    let d = src0_f16(blk + 80u) * f32(sc & 0xfu);
    let m = src0_f16(blk + 82u) * f32(sc >> 4u);
    let q = blk + 16u + n * 32u + half * 16u + l;
    let shift = 2u * j;
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        out[t] = d * f32((w0 >> (8u * t + shift)) & 3u) - m;
        out[t + 4u] = d * f32((w1 >> (8u * t + shift)) & 3u) - m;
    }
    return out;
}
