// The convolutions and their row-wise kin, mirroring the CPU kernels
// (backends/cpu/src/ops/conv.rs, conv_transpose.rs, pool.rs, pad.rs): one
// thread per result element (grid-stride), every read through the
// tensors' strides. Each element's sum runs over the same taps in the same
// order as the CPU's, products and sums rounded separately (__fmul_rn /
// __fadd_rn: no FMA), so the results match it.

// Where source index o * stride + k * dilation - pad lands; -1 outside 0..len.
__device__ __forceinline__ i64 conv_tap(i64 o, i64 k, i64 stride, i64 pad, i64 dilation, i64 len) {
    const i64 at = o * stride + k * dilation - pad;
    return at >= 0 && at < len ? at : -1;
}

// CONV_2D and CONV_2D_DW: src0 the kernel [KW, KH, IC, OC] (depthwise
// [KW, KH, 1, C]) F32 / F16, src1 the image [W, H, IC, N] F32, dst [OW, OH,
// OC, N] F32. i: s0, s1, p0, p1, d0, d1, depthwise (0 / 1). Sums over the
// input channels (only the result's own channel when depthwise), then
// kernel rows, then kernel columns, as the CPU.
extern "C" __global__ void conv_2d(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& w = a.src[0];
    const Tensor& img = a.src[1];
    const bool depthwise = a.i[6] != 0;
    const i64 kw = w.ne[0], kh = w.ne[1];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const i64 x = idx[0], y = idx[1], oc = idx[2], b = idx[3];
        const i64 c_first = depthwise ? oc : 0;
        const i64 c_end = depthwise ? oc + 1 : img.ne[2];
        float acc = 0.0f;
        for (i64 c = c_first; c < c_end; c++) {
            const i64 kc = depthwise ? 0 : c;
            for (i64 ky = 0; ky < kh; ky++) {
                const i64 sy = conv_tap(y, ky, a.i[1], a.i[3], a.i[5], img.ne[1]);
                if (sy < 0) continue;
                for (i64 kx = 0; kx < kw; kx++) {
                    const i64 sx = conv_tap(x, kx, a.i[0], a.i[2], a.i[4], img.ne[0]);
                    if (sx < 0) continue;
                    const float wv = load_f(w.data + byte_offset4(w, kx, ky, kc, oc), w.type);
                    const float v = *(const float*)(img.data + byte_offset4(img, sx, sy, c, b));
                    acc = __fadd_rn(acc, __fmul_rn(wv, v));
                }
            }
        }
        *(float*)(d.data + byte_offset(d, idx)) = acc;
    }
}

// CONV_TRANSPOSE_1D (i[0] = 0) and CONV_TRANSPOSE_2D (i[0] = 1); i[1] the
// stride. 1-D: src0 the kernel [K, OC, IC], src1 the input [L, IC], dst
// [OW, OC]; 2-D: kernel [KW, KH, OC, IC], input [W, H, IC, N], dst [OW, OH,
// OC, N]. The CPU scatters each input element over the result; gathered
// here, each element sums the same terms in the CPU's order: kernel rows
// (2-D), then input channels, then kernel columns.
extern "C" __global__ void conv_transpose(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& w = a.src[0];
    const Tensor& in = a.src[1];
    const bool two_d = a.i[0] != 0;
    const i64 s = a.i[1];
    const i64 kw = w.ne[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const i64 x = idx[0];
        float acc = 0.0f;
        if (two_d) {
            const i64 y = idx[1], o = idx[2], b = idx[3];
            const i64 kh = w.ne[1], ih = in.ne[1], iw = in.ne[0], ic = in.ne[2];
            for (i64 ky = 0; ky < kh && ky <= y; ky++) {
                if ((y - ky) % s != 0 || (y - ky) / s >= ih) continue;
                const i64 iy = (y - ky) / s;
                for (i64 c = 0; c < ic; c++) {
                    for (i64 kx = 0; kx < kw && kx <= x; kx++) {
                        if ((x - kx) % s != 0 || (x - kx) / s >= iw) continue;
                        const i64 ix = (x - kx) / s;
                        const float wv = load_f(w.data + byte_offset4(w, kx, ky, o, c), w.type);
                        const float v = *(const float*)(in.data + byte_offset4(in, ix, iy, c, b));
                        acc = __fadd_rn(acc, __fmul_rn(wv, v));
                    }
                }
            }
        } else {
            const i64 o = idx[1];
            const i64 iw = in.ne[0], ic = in.ne[1];
            for (i64 c = 0; c < ic; c++) {
                for (i64 kx = 0; kx < kw && kx <= x; kx++) {
                    if ((x - kx) % s != 0 || (x - kx) / s >= iw) continue;
                    const i64 ix = (x - kx) / s;
                    const float wv = load_f(w.data + byte_offset4(w, kx, o, c, 0), w.type);
                    const float v = *(const float*)(in.data + byte_offset4(in, ix, c, 0, 0));
                    acc = __fadd_rn(acc, __fmul_rn(wv, v));
                }
            }
        }
        *(float*)(d.data + byte_offset(d, idx)) = acc;
    }
}

// POOL_1D along dim 0: i: k, s, p, op (0 max, 1 average). The window
// o * s - p + 0..k clipped to the row; the average divides by the elements
// inside it (0 for none), as ggml's POOL_1D (unlike POOL_2D's).
extern "C" __global__ void pool_1d(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& src = a.src[0];
    const i64 kk = a.i[0], s = a.i[1], p = a.i[2];
    const bool is_max = a.i[3] == 0;
    const i64 len = src.ne[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const i64 start = idx[0] * s - p;
        i64 end = start + kk;
        end = end < 0 ? 0 : (end > len ? len : end);
        i64 begin = start > 0 ? start : 0;
        begin = begin < end ? begin : end;
        float res = is_max ? -3.40282347e+38f : 0.0f;
        for (i64 j = begin; j < end; j++) {
            const float v = load_f(src.data + byte_offset4(src, j, idx[1], idx[2], idx[3]), src.type);
            res = is_max ? fmaxf(res, v) : __fadd_rn(res, v);
        }
        if (!is_max) {
            const i64 count = end - begin;
            res = count > 0 ? res / (float)count : 0.0f;
        }
        *(float*)(d.data + byte_offset(d, idx)) = res;
    }
}

// PAD_REFLECT_1D: i[0] = p0; rows mirrored at both ends, the edge element
// not repeated (the plan checks p0, p1 < the row length).
extern "C" __global__ void pad_reflect_1d(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& src = a.src[0];
    const i64 p0 = a.i[0], m0 = src.ne[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const i64 i0 = idx[0];
        const i64 j = i0 < p0 ? p0 - i0 : (i0 - p0 < m0 ? i0 - p0 : 2 * (m0 - 1) - (i0 - p0));
        const float v = *(const float*)(src.data + byte_offset4(src, j, idx[1], idx[2], idx[3]));
        *(float*)(d.data + byte_offset(d, idx)) = v;
    }
}

// ROLL: i[0..4] the shift of each dim; element i comes from (i - shift)
// wrapped into the source (the plan checks no dim is empty).
extern "C" __global__ void roll(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& src = a.src[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4], j[4];
        unravel(k, d.ne, idx);
        for (int q = 0; q < 4; q++) {
            const i64 len = src.ne[q];
            j[q] = (((idx[q] - a.i[q]) % len) + len) % len;
        }
        const float v = *(const float*)(src.data + byte_offset(src, j));
        *(float*)(d.data + byte_offset(d, idx)) = v;
    }
}
