// deq8 for Q8_0 (ggml block_q8_0, 34 bytes: f16 d, 32 signed bytes).

fn sbyte(w: u32, t: u32) -> f32 {
    return f32(bitcast<i32>(w << (24u - 8u * t)) >> 24u);
}

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 32u) * 34u;
    let d = src0_f16(blk);
    let q = blk + 2u + (k % 32u);
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        out[t] = sbyte(w0, t) * d;
        out[t + 4u] = sbyte(w1, t) * d;
    }
    return out;
}
