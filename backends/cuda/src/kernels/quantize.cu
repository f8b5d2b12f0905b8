// Activations quantized on the GPU for the quantized products: F32 rows
// (any strides) to Q8_1 blocks packed row after row, in logical row order:
// d = max|x| / 127, q = round(x / d) (half away from zero, as the CPU's
// reference quantizer), s = d * sum(q). One warp per block of 32 values.

struct BlockQ8_1 {
    u16 d;
    u16 s;
    int qs[8];
};

static_assert(sizeof(BlockQ8_1) == GT_Q8_1_BYTES, "a Q8_1 block is ggml's 36 bytes");

// src0: [k, n, ne2, ne3] F32; dst.data: the packed blocks (k / 32 per row).
extern "C" __global__ void quantize_q8_1(const Args a) {
    const Tensor& s = a.src[0];
    BlockQ8_1* out = (BlockQ8_1*)a.dst.data;
    const i64 per_row = s.ne[0] / 32;
    const i64 blocks = per_row * s.ne[1] * s.ne[2] * s.ne[3];
    const int lane = threadIdx.x % 32;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const i64 warps = (i64)gridDim.x * blockDim.x / 32;
    for (i64 bi = warp; bi < blocks; bi += warps) {
        const i64 r = bi / per_row;
        const i64 i0 = (bi % per_row) * 32 + lane;
        const i64 i1 = r % s.ne[1], i2 = (r / s.ne[1]) % s.ne[2], i3 = r / (s.ne[1] * s.ne[2]);
        const float x = *(const float*)(s.data + byte_offset4(s, i0, i1, i2, i3));
        const float amax = warp_max(fabsf(x));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const int q = (int)roundf(x * id);
        const int sum = warp_sum_int(q);
        // Four lanes at a time pack their bytes into one int.
        const int b0 = __shfl_sync(0xffffffffu, q, (lane & ~3) + 0) & 0xFF;
        const int b1 = __shfl_sync(0xffffffffu, q, (lane & ~3) + 1) & 0xFF;
        const int b2 = __shfl_sync(0xffffffffu, q, (lane & ~3) + 2) & 0xFF;
        const int b3 = __shfl_sync(0xffffffffu, q, (lane & ~3) + 3) & 0xFF;
        if (lane % 4 == 0) {
            out[bi].qs[lane / 4] = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
        }
        if (lane == 0) {
            out[bi].d = f32_to_f16(d);
            out[bi].s = f32_to_f16((float)sum * d);
        }
    }
}
