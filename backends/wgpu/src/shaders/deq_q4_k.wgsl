// deq8 for Q4_K (ggml block_q4_K, 144 bytes: f16 d, f16 dmin, 12 bytes of
// packed 6-bit scales and mins, 128 bytes of nibbles). The 256 elements are
// 4 groups of 64: the low nibbles of 32 bytes, then their high nibbles, each
// half a sub-block of 32 with its own scale and min (`scale_min_k4`, in
// scale_min_k4.wgsl).

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    let blk = row + (k / 256u) * 144u;
    let j = k % 256u;
    let g = j / 64u;
    let l = j % 64u;
    let hi = l >= 32u;
    let sm = scale_min_k4(blk, 2u * g + select(0u, 1u, hi));
    let d = src0_f16(blk) * sm.x;
    let m = src0_f16(blk + 2u) * sm.y;
    let q = blk + 16u + g * 32u + (l % 32u);
    let shift = select(0u, 4u, hi);
    let w0 = src0_u32(q);
    let w1 = src0_u32(q + 4u);
    var out: array<f32, 8>;
    for (var t = 0u; t < 4u; t++) {
        out[t] = d * f32((w0 >> (8u * t + shift)) & 0xfu) - m;
        out[t + 4u] = d * f32((w1 >> (8u * t + shift)) & 0xfu) - m;
    }
    return out;
}
