// scale_min_k4 (ggml's get_scale_min_k4) for the dequantizers of Q4_K and
// Q5_K, which pack their scales and mins alike: 12 bytes from byte 4 of the
// block at byte `blk`, eight 6-bit scales and eight 6-bit mins. Returns the
// scale and the min of sub-block j (of 32 elements) as f32.
fn scale_min_k4(blk: u32, j: u32) -> vec2<f32> {
    let q = blk + 4u;
    if (j < 4u) {
        return vec2<f32>(f32(src0_u8(q + j) & 63u), f32(src0_u8(q + j + 4u) & 63u));
    }
    let sc = (src0_u8(q + j + 4u) & 0xfu) | ((src0_u8(q + j - 4u) >> 6u) << 4u);
    let mn = (src0_u8(q + j + 4u) >> 4u) | ((src0_u8(q + j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(mn));
}
