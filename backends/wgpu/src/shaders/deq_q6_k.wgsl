// deq8 for Q6_K (ggml block_q6_K, 210 bytes: 128 bytes of low nibbles ql,
// 64 bytes of high 2-bit pairs qh, 16 signed 8-bit scales, f16 d). Each half
// of 128 elements has 4 quarters of 32; quarter qd of half n takes the low
// (qd 0, 1) or high (qd 2, 3) nibbles of ql[64n + 32(qd & 1) + l] and bits
// 2qd..2qd+1 of qh[32n + l]; the value is d * scale * (q - 32).

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 256u) * 210u;
    let j = k % 256u;
    let n = j / 128u;
    let qd = (j % 128u) / 32u;
    let l = j % 32u;
    let sc = f32(bitcast<i32>(src0_u8(blk + 192u + n * 8u + l / 16u + qd * 2u) << 24u) >> 24u);
    let d = src0_f16(blk + 208u) * sc;
    let ql = blk + n * 64u + l + (qd & 1u) * 32u;
    let qh = blk + 128u + n * 32u + l;
    let ls = (qd >> 1u) * 4u;
    let hs = qd * 2u;
    let l0 = src0_u32(ql);
    let l1 = src0_u32(ql + 4u);
    let h0 = src0_u32(qh);
    let h1 = src0_u32(qh + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        let q0 = ((l0 >> (8u * t + ls)) & 0xfu) | (((h0 >> (8u * t + hs)) & 3u) << 4u);
        let q1 = ((l1 >> (8u * t + ls)) & 0xfu) | (((h1 >> (8u * t + hs)) & 3u) << 4u);
        out[t] = d * (f32(q0) - 32.0);
        out[t + 4u] = d * (f32(q1) - 32.0);
    }
    return out;
}
