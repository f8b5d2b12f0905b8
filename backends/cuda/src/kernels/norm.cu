// Row kernels, one block per row: NORM, RMS_NORM, L2_NORM and SOFT_MAX (scale, an
// optional F32 / F16 mask broadcast over dims 2 and 3, ALiBi slopes).

// dst = (x - mean) / sqrt(var + eps) (i[0] = 0), x / sqrt(mean(x^2) + eps) (i[0] = 1)
// or x / max(sqrt(sum(x^2)), eps) (i[0] = 2, L2_NORM); f[0] = eps.
extern "C" __global__ void norm_rows(const Args a) {
    __shared__ float scratch[32];
    const Tensor& s = a.src[0];
    const Tensor& d = a.dst;
    const bool rms = a.i[0] != 0;
    const bool l2 = a.i[0] == 2;
    const float eps = a.f[0];
    const i64 r = blockIdx.x;
    const i64 i1 = r % s.ne[1], i2 = (r / s.ne[1]) % s.ne[2], i3 = r / (s.ne[1] * s.ne[2]);
    const i64 n = s.ne[0];
    float mean = 0.0f;
    if (!rms) {
        float acc = 0.0f;
        for (i64 i0 = threadIdx.x; i0 < n; i0 += blockDim.x) {
            acc += load_f(s.data + byte_offset4(s, i0, i1, i2, i3), s.type);
        }
        mean = block_sum(acc, scratch) / (float)n;
    }
    float acc = 0.0f;
    for (i64 i0 = threadIdx.x; i0 < n; i0 += blockDim.x) {
        const float v = load_f(s.data + byte_offset4(s, i0, i1, i2, i3), s.type) - mean;
        acc += v * v;
    }
    const float total = block_sum(acc, scratch);
    const float inv = l2 ? 1.0f / fmaxf(sqrtf(total), eps) : 1.0f / sqrtf(total / (float)n + eps);
    for (i64 i0 = threadIdx.x; i0 < n; i0 += blockDim.x) {
        const float v = load_f(s.data + byte_offset4(s, i0, i1, i2, i3), s.type);
        store_f(d.data + byte_offset4(d, i0, i1, i2, i3), d.type, (v - mean) * inv);
    }
}

// dst = softmax(x * scale + slope * mask) per row; f[0] = scale, f[1] = m0,
// f[2] = m1, i[0] = 1 with a mask (src1), i[1] = ALiBi on, i[2] = n_head_log2.
// A row whose logits are all -inf becomes zeros (as on the CPU).
extern "C" __global__ void soft_max(const Args a) {
    __shared__ float scratch[32];
    const Tensor& s = a.src[0];
    const Tensor& m = a.src[1];
    const Tensor& d = a.dst;
    const bool masked = a.i[0] != 0;
    const i64 r = blockIdx.x;
    const i64 i1 = r % s.ne[1], i2 = (r / s.ne[1]) % s.ne[2], i3 = r / (s.ne[1] * s.ne[2]);
    float slope = 1.0f;
    if (a.i[1] != 0) {
        const i64 nl2 = a.i[2];
        slope = i2 < nl2 ? powf(a.f[1], (float)(i2 + 1)) : powf(a.f[2], (float)(2 * (i2 - nl2) + 1));
    }
    const i64 n = s.ne[0];
    const char* mrow = masked ? m.data + byte_offset4(m, 0, i1, i2 % m.ne[2], i3 % m.ne[3]) : 0;
    float mx = GT_NEG_INF;
    for (i64 i0 = threadIdx.x; i0 < n; i0 += blockDim.x) {
        float w = load_f(s.data + byte_offset4(s, i0, i1, i2, i3), s.type) * a.f[0];
        if (masked) {
            w += slope * load_f(mrow + i0 * m.nb[0], m.type);
        }
        mx = fmaxf(mx, w);
    }
    mx = block_max(mx, scratch);
    // An attention sink (i[3] = 1, src[2] one F32 per head) joins the row's
    // softmax as one more logit with no output of its own.
    const bool sinks = a.i[3] != 0;
    const float sink = sinks ? *(const float*)(a.src[2].data + i2 * a.src[2].nb[0]) : GT_NEG_INF;
    mx = fmaxf(mx, sink);
    float sum = 0.0f;
    if (mx != GT_NEG_INF) {
        for (i64 i0 = threadIdx.x; i0 < n; i0 += blockDim.x) {
            float w = load_f(s.data + byte_offset4(s, i0, i1, i2, i3), s.type) * a.f[0];
            if (masked) {
                w += slope * load_f(mrow + i0 * m.nb[0], m.type);
            }
            sum += expf(w - mx);
        }
    }
    sum = block_sum(sum, scratch);
    if (sinks) {
        sum += expf(sink - mx);
    }
    const float inv = mx == GT_NEG_INF ? 0.0f : 1.0f / sum;
    // Every read of the row is done before any write (the op may run in place).
    __syncthreads();
    for (i64 i0 = threadIdx.x; i0 < n; i0 += blockDim.x) {
        float w = load_f(s.data + byte_offset4(s, i0, i1, i2, i3), s.type) * a.f[0];
        if (masked) {
            w += slope * load_f(mrow + i0 * m.nb[0], m.type);
        }
        const float e = mx == GT_NEG_INF ? 0.0f : expf(w - mx) * inv;
        store_f(d.data + byte_offset4(d, i0, i1, i2, i3), d.type, e);
    }
}
