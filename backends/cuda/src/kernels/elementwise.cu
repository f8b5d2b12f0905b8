// Element-wise kernels: the unary functions, SCALE, CLAMP, LEAKY_RELU, the binary ops
// with src1 repeated over src0, the gated linear units and DIAG_MASK_INF.
// One thread per result element (grid-stride); every dtype goes through
// f32, as in the CPU backend, so F16 and BF16 results round the same way.

// GELU's tanh approximation written as the CPU writes it: x / (1 + e^(-2u)).
__device__ __forceinline__ float gelu_tanh(float x) {
    const float u = 0.7978846f * x * (1.0f + 0.044715f * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

__device__ __forceinline__ float gelu_erf(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678f));
}

// ggml's quick GELU, x * sigmoid(1.702 x); -0 for very negative x (x / inf).
__device__ __forceinline__ float gelu_quick(float x) {
    return x / (1.0f + expf(-1.702f * x));
}

// min(1, max(0, (x + 3) / 6)), ggml's hard sigmoid.
__device__ __forceinline__ float hard_gate(float x) {
    return fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f));
}

__device__ __forceinline__ float unary_op(int op, float x, const float* f) {
    const float f0 = f[0], f1 = f[1];
    switch (op) {
    case GT_UNARY_NEG: return -x;
    case GT_UNARY_ABS: return fabsf(x);
    case GT_UNARY_SQR: return x * x;
    case GT_UNARY_SQRT: return sqrtf(x);
    case GT_UNARY_EXP: return expf(x);
    case GT_UNARY_LOG: return logf(x);
    case GT_UNARY_TANH: return tanhf(x);
    case GT_UNARY_RELU: return fmaxf(x, 0.0f);
    case GT_UNARY_GELU: return gelu_tanh(x);
    case GT_UNARY_GELU_ERF: return gelu_erf(x);
    case GT_UNARY_SILU: return x / (1.0f + expf(-x));
    case GT_UNARY_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case GT_UNARY_SIN: return sinf(x);
    case GT_UNARY_COS: return cosf(x);
    // log1pf where ggml has logf(1 + e^x): the same, without losing small values.
    case GT_UNARY_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
    case GT_UNARY_ELU: return x > 0.0f ? x : expm1f(x);
    case GT_UNARY_HARDSWISH: return x * hard_gate(x);
    case GT_UNARY_HARDSIGMOID: return hard_gate(x);
    case GT_UNARY_GELU_QUICK: return gelu_quick(x);
    case GT_UNARY_STEP: return x > 0.0f ? 1.0f : 0.0f;
    case GT_UNARY_SGN: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    case GT_UNARY_ROUND: return roundf(x);
    case GT_UNARY_FLOOR: return floorf(x);
    case GT_UNARY_CEIL: return ceilf(x);
    case GT_UNARY_TRUNC: return truncf(x);
    case GT_UNARY_EXPM1: return expm1f(x);
    case GT_UNARY_SCALE: return fmaf(x, f0, f1);
    case GT_UNARY_CLAMP: return fmaxf(fminf(x, f1), f0);
    case GT_UNARY_LEAKY_RELU: return (x > 0.0f ? x : 0.0f) + f0 * (x < 0.0f ? x : 0.0f);
    // f: alpha_n, alpha_p, beta, eps (ggml's stored parameters), each
    // product and sum rounded as the CPU's.
    case GT_UNARY_XIELU:
        return x > 0.0f ? __fadd_rn(__fmul_rn(__fmul_rn(f[1], x), x), __fmul_rn(f[2], x))
                        : __fadd_rn(__fmul_rn(__fsub_rn(expm1f(fminf(x, f[3])), x), f[0]), __fmul_rn(f[2], x));
    }
    return x;
}

// dst = op(src0); i[0] the op, f its parameters (scale and bias, min and
// max, LEAKY_RELU's negative slope, or XIELU's four).
extern "C" __global__ void unary(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const int op = (int)a.i[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const float x = load_f(s.data + byte_offset(s, idx), s.type);
        store_f(d.data + byte_offset(d, idx), d.type, unary_op(op, x, a.f));
    }
}

// dst = src0 (op) src1, src1 repeated over src0 (index i % ne1 along each dim); i[0] the op.
extern "C" __global__ void binary(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& x = a.src[0];
    const Tensor& y = a.src[1];
    const int op = (int)a.i[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const float u = load_f(x.data + byte_offset(x, idx), x.type);
        const float v = load_f(y.data + byte_offset4(y, idx[0] % y.ne[0], idx[1] % y.ne[1], idx[2] % y.ne[2],
                                                     idx[3] % y.ne[3]), y.type);
        float r;
        switch (op) {
        case GT_BINARY_ADD: r = u + v; break;
        case GT_BINARY_SUB: r = u - v; break;
        case GT_BINARY_MUL: r = u * v; break;
        default: r = u / v; break;
        }
        store_f(d.data + byte_offset(d, idx), d.type, r);
    }
}

// dst = act(x) * g (SWIGLU_OAI: f[0] alpha, f[1] limit). i[0] the activation, i[1] = 1 when swapped, i[2] = 1
// when the gate is src1 (split form); fused, x and g are the two halves of
// each src0 row: x the first half (the second when swapped), g the other.
extern "C" __global__ void glu(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const Tensor& gate = a.src[1];
    const int op = (int)a.i[0];
    const bool swapped = a.i[1] != 0;
    const bool split = a.i[2] != 0;
    const i64 nc = d.ne[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        float x;
        float g;
        if (split) {
            x = load_f(s.data + byte_offset(s, idx), s.type);
            g = load_f(gate.data + byte_offset(gate, idx), gate.type);
        } else {
            const i64 xi = swapped ? idx[0] + nc : idx[0];
            const i64 gi = swapped ? idx[0] : idx[0] + nc;
            x = load_f(s.data + byte_offset4(s, xi, idx[1], idx[2], idx[3]), s.type);
            g = load_f(s.data + byte_offset4(s, gi, idx[1], idx[2], idx[3]), s.type);
        }
        float r;
        switch (op) {
        case GT_GLU_SWIGLU: r = x / (1.0f + expf(-x)) * g; break;
        case GT_GLU_GEGLU: r = gelu_tanh(x) * g; break;
        // ggml's REGLU skips the gate where x <= 0 (an infinite gate gives 0 there).
        case GT_GLU_REGLU: r = x > 0.0f ? x * g : 0.0f; break;
        case GT_GLU_GEGLU_ERF: r = gelu_erf(x) * g; break;
        // gpt-oss: f[0] = alpha, f[1] = limit; C++'s min / clamp, as ggml.
        case GT_GLU_SWIGLU_OAI: {
            const float alpha = a.f[0], limit = a.f[1];
            const float xc = limit < x ? limit : x;
            const float gc = g < -limit ? -limit : (limit < g ? limit : g);
            r = xc / (1.0f + expf(-alpha * xc)) * (gc + 1.0f);
            break;
        }
        default: r = gelu_quick(x) * g; break;
        }
        store_f(d.data + byte_offset(d, idx), d.type, r);
    }
}

// dst[i0, i1] = -inf (DIAG_MASK_INF; 0 for DIAG_MASK_ZERO, i[1] = 1) where
// i0 > n_past + i1, else src0; i[0] = n_past.
extern "C" __global__ void diag_mask_inf(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const i64 n_past = a.i[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const float masked = a.i[1] != 0 ? 0.0f : GT_NEG_INF;
        const float x = idx[0] > n_past + idx[1] ? masked : load_f(s.data + byte_offset(s, idx), s.type);
        store_f(d.data + byte_offset(d, idx), d.type, x);
    }
}
