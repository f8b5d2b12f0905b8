// The vision and diffusion ops: IM2COL, POOL_2D, UPSCALE and PAD (a
// grid-stride loop over the result's elements), GROUP_NORM (one block per
// group of one sample). Every read goes through the tensors' strides.

// IM2COL: result row c0 = (channel, kernel row, kernel column) of the patch
// at (c1, c2); src[1] the image (src[0], the kernel, only sets the shape).
// i: s0, s1, p0, p1, d0, d1, KW, KH; f[0] != 0: 2-D.
extern "C" __global__ void im2col(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[1];
    const bool two_d = a.f[0] != 0.0f;
    const i64 kw = a.i[6], kh = a.i[7];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 c[4];
        unravel(k, d.ne, c);
        const i64 kx = c[0] % kw, ky = (c[0] / kw) % kh, ch = c[0] / (kw * kh);
        const i64 x = c[1] * a.i[0] + kx * a.i[4] - a.i[2];
        float v = 0.0f;
        if (two_d) {
            const i64 y = c[2] * a.i[1] + ky * a.i[5] - a.i[3];
            if (x >= 0 && x < s.ne[0] && y >= 0 && y < s.ne[1]) {
                v = load_f(s.data + byte_offset4(s, x, y, ch, c[3]), s.type);
            }
        } else if (x >= 0 && x < s.ne[0]) {
            v = load_f(s.data + byte_offset4(s, x, ch, c[2], 0), s.type);
        }
        store_f(d.data + byte_offset(d, c), d.type, v);
    }
}

// POOL_2D: i: k0, k1, s0, s1, p0, p1, op (0 max, 1 average over the whole
// window, padding counted as zeros, as ggml's).
extern "C" __global__ void pool_2d(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const bool is_max = a.i[6] == 0;
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 c[4];
        unravel(k, d.ne, c);
        float res = is_max ? -3.40282347e+38f : 0.0f;
        const i64 ix = c[0] * a.i[2] - a.i[4], iy = c[1] * a.i[3] - a.i[5];
        for (i64 ky = 0; ky < a.i[1]; ky++) {
            const i64 y = iy + ky;
            if (y < 0 || y >= s.ne[1]) continue;
            for (i64 kx = 0; kx < a.i[0]; kx++) {
                const i64 x = ix + kx;
                if (x < 0 || x >= s.ne[0]) continue;
                const float v = load_f(s.data + byte_offset4(s, x, y, c[2], c[3]), s.type);
                res = is_max ? fmaxf(res, v) : res + v;
            }
        }
        if (!is_max) res /= (float)(a.i[0] * a.i[1]);
        store_f(d.data + byte_offset(d, c), d.type, res);
    }
}

__device__ __forceinline__ i64 nearest_index(i64 i, float sf, i64 n) {
    const i64 j = (i64)((float)i / sf);
    return j < n - 1 ? j : n - 1;
}

__device__ __forceinline__ i64 clamp_index(i64 i, i64 n) {
    return i < 0 ? 0 : (i > n - 1 ? n - 1 : i);
}

// UPSCALE with ggml's f32 index arithmetic: f[0..4] the scale of each dim,
// f[4] the pixel offset (0.5, or 0 with aligned corners); i[0]: 0 nearest,
// 1 bilinear over dims 0 and 1.
extern "C" __global__ void upscale(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 c[4];
        unravel(k, d.ne, c);
        const i64 j2 = nearest_index(c[2], a.f[2], s.ne[2]), j3 = nearest_index(c[3], a.f[3], s.ne[3]);
        float v;
        if (a.i[0] == 0) {
            const i64 j0 = nearest_index(c[0], a.f[0], s.ne[0]), j1 = nearest_index(c[1], a.f[1], s.ne[1]);
            v = load_f(s.data + byte_offset4(s, j0, j1, j2, j3), s.type);
        } else {
            const float off = a.f[4];
            const float x = ((float)c[0] + off) / a.f[0] - off;
            const float y = ((float)c[1] + off) / a.f[1] - off;
            const i64 fx = (i64)floorf(x), fy = (i64)floorf(y);
            const i64 x0 = clamp_index(fx, s.ne[0]), x1 = clamp_index(fx + 1, s.ne[0]);
            const i64 y0 = clamp_index(fy, s.ne[1]), y1 = clamp_index(fy + 1, s.ne[1]);
            const float dx = fminf(fmaxf(x - (float)x0, 0.0f), 1.0f);
            const float dy = fminf(fmaxf(y - (float)y0, 0.0f), 1.0f);
            const float p00 = load_f(s.data + byte_offset4(s, x0, y0, j2, j3), s.type);
            const float p10 = load_f(s.data + byte_offset4(s, x1, y0, j2, j3), s.type);
            const float p01 = load_f(s.data + byte_offset4(s, x0, y1, j2, j3), s.type);
            const float p11 = load_f(s.data + byte_offset4(s, x1, y1, j2, j3), s.type);
            v = p00 * (1.0f - dx) * (1.0f - dy) + p10 * dx * (1.0f - dy) + p01 * (1.0f - dx) * dy + p11 * dx * dy;
        }
        store_f(d.data + byte_offset(d, c), d.type, v);
    }
}

// PAD: i[0..4] the padding before each dim; i[4] != 0: circular (the source
// wrapped around) instead of zeros.
extern "C" __global__ void pad(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 c[4], j[4];
        unravel(k, d.ne, c);
        bool inside = true;
        for (int q = 0; q < 4; q++) {
            j[q] = c[q] - a.i[q];
            if (a.i[4] != 0) {
                j[q] = ((j[q] % s.ne[q]) + s.ne[q]) % s.ne[q];
            }
            inside = inside && j[q] >= 0 && j[q] < s.ne[q];
        }
        const float v = inside ? load_f(s.data + byte_offset(s, j), s.type) : 0.0f;
        store_f(d.data + byte_offset(d, c), d.type, v);
    }
}

// GROUP_NORM: block b is group b % i[0] of sample b / i[0]; i[1] channels a
// group; f[0] = eps.
extern "C" __global__ void group_norm(const Args a) {
    __shared__ float scratch[32];
    const Tensor& s = a.src[0];
    const Tensor& d = a.dst;
    const i64 g = blockIdx.x % a.i[0], smp = blockIdx.x / a.i[0];
    const i64 c0 = g * a.i[1] < s.ne[2] ? g * a.i[1] : s.ne[2];
    const i64 c1 = c0 + a.i[1] < s.ne[2] ? c0 + a.i[1] : s.ne[2];
    const i64 plane = s.ne[0] * s.ne[1];
    const i64 count = plane * (c1 - c0);
    if (count == 0) return;
    float acc = 0.0f;
    for (i64 k = threadIdx.x; k < count; k += blockDim.x) {
        acc += load_f(s.data + byte_offset4(s, k % s.ne[0], (k / s.ne[0]) % s.ne[1], c0 + k / plane, smp), s.type);
    }
    const float mean = block_sum(acc, scratch) / (float)count;
    acc = 0.0f;
    for (i64 k = threadIdx.x; k < count; k += blockDim.x) {
        const float v =
            load_f(s.data + byte_offset4(s, k % s.ne[0], (k / s.ne[0]) % s.ne[1], c0 + k / plane, smp), s.type) - mean;
        acc += v * v;
    }
    const float scale = 1.0f / sqrtf(block_sum(acc, scratch) / (float)count + a.f[0]);
    for (i64 k = threadIdx.x; k < count; k += blockDim.x) {
        const i64 x = k % s.ne[0], y = (k / s.ne[0]) % s.ne[1], ch = c0 + k / plane;
        const float v = load_f(s.data + byte_offset4(s, x, y, ch, smp), s.type);
        store_f(d.data + byte_offset4(d, x, y, ch, smp), d.type, (v - mean) * scale);
    }
}
