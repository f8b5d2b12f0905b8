// FLASH_ATTN_EXT, the vector kernel: one block of GT_FA_WARPS warps per
// (query, head, batch). Each warp takes every GT_FA_WARPS-th key, scores it
// (lanes over the head dimension, a warp sum), and keeps an online softmax
// (running maximum, sum and accumulator, rescaled when the maximum grows);
// the warps' partial results are merged at the end. It is written for
// decoding (one query per head); prompts run it once per query.
//
// src0 Q [dk, n_q, n_head, n_batch] F32; src1 K [dk, n_kv, n_head_kv, ...]
// and src2 V [dv, n_kv, ...] in F32 / F16 / BF16 (grouped-query broadcast);
// src3 optional mask [n_kv, >= n_q, ...] F32 / F16. dst [dv, n_head, n_q,
// n_batch] F32; src4 optional attention sinks [n_head] F32 (one more logit
// per head, with no value: it joins the softmax's maximum and sum in the
// merge, as the CPU folds it in after the keys). f[0] scale (already
// divided by softcap when capping), f[1] softcap, f[2] m0, f[3] m1; i[0] = 1
// with a mask, i[1] = ALiBi on, i[2] = n_head_log2, i[3] = 1 with sinks. Dynamic shared memory: dk floats for Q, then
// GT_FA_WARPS * (dv + 2) floats for the warps' partial results.
extern "C" __global__ void flash_attn_vec(const Args a) {
    extern __shared__ float smem[];
    const Tensor& q = a.src[0];
    const Tensor& k = a.src[1];
    const Tensor& v = a.src[2];
    const Tensor& m = a.src[3];
    const Tensor& d = a.dst;
    const i64 iq1 = blockIdx.x, iq2 = blockIdx.y, iq3 = blockIdx.z;
    const i64 dk = q.ne[0], dv = v.ne[0], n_kv = k.ne[1];
    const i64 n_head = q.ne[2], n_batch = q.ne[3];
    const i64 kh2 = iq2 / (n_head / k.ne[2]), kh3 = iq3 / (n_batch / k.ne[3]);
    const i64 vh2 = iq2 / (n_head / v.ne[2]), vh3 = iq3 / (n_batch / v.ne[3]);
    const bool masked = a.i[0] != 0;
    const float scale = a.f[0], softcap = a.f[1];
    float slope = 1.0f;
    if (a.i[1] != 0) {
        const i64 nl2 = a.i[2];
        slope = iq2 < nl2 ? powf(a.f[2], (float)(iq2 + 1)) : powf(a.f[3], (float)(2 * (iq2 - nl2) + 1));
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float* qs = smem;
    float* part = smem + dk;
    for (i64 i = threadIdx.x; i < dk; i += blockDim.x) {
        qs[i] = *(const float*)(q.data + byte_offset4(q, i, iq1, iq2, iq3));
    }
    __syncthreads();
    const char* mrow = masked ? m.data + byte_offset4(m, 0, iq1, iq2 % m.ne[2], iq3 % m.ne[3]) : 0;
    float running_max = GT_NEG_INF;
    float sum = 0.0f;
    float acc[GT_FA_MAX_DV / 32];
    for (int t = 0; t < GT_FA_MAX_DV / 32; t++) {
        acc[t] = 0.0f;
    }
    for (i64 ic = warp; ic < n_kv; ic += GT_FA_WARPS) {
        const float mv = masked ? slope * load_f(mrow + ic * m.nb[0], m.type) : 0.0f;
        if (mv == GT_NEG_INF) {
            continue;
        }
        const char* krow = k.data + byte_offset4(k, 0, ic, kh2, kh3);
        float dot = 0.0f;
        for (i64 i = lane; i < dk; i += 32) {
            dot += qs[i] * load_f(krow + i * k.nb[0], k.type);
        }
        float s = warp_sum(dot) * scale;
        if (softcap != 0.0f) {
            s = softcap * tanhf(s);
        }
        s += mv;
        if (s > running_max) {
            const float rescale = expf(running_max - s);
            for (int t = 0; t < GT_FA_MAX_DV / 32; t++) {
                acc[t] *= rescale;
            }
            sum *= rescale;
            running_max = s;
        }
        const float w = expf(s - running_max);
        sum += w;
        const char* vrow = v.data + byte_offset4(v, 0, ic, vh2, vh3);
        for (int t = 0; t < GT_FA_MAX_DV / 32; t++) {
            const i64 i = lane + 32 * t;
            if (i < dv) {
                acc[t] += w * load_f(vrow + i * v.nb[0], v.type);
            }
        }
    }
    // Each warp's maximum, sum and accumulator, then one merge over the warps.
    float* mine = part + warp * (dv + 2);
    for (int t = 0; t < GT_FA_MAX_DV / 32; t++) {
        const i64 i = lane + 32 * t;
        if (i < dv) {
            mine[2 + i] = acc[t];
        }
    }
    if (lane == 0) {
        mine[0] = running_max;
        mine[1] = sum;
    }
    __syncthreads();
    float total_max = GT_NEG_INF;
    for (int w = 0; w < GT_FA_WARPS; w++) {
        total_max = fmaxf(total_max, part[w * (dv + 2)]);
    }
    const bool has_sink = a.i[3] != 0;
    const float sink = has_sink ? *(const float*)(a.src[4].data + iq2 * a.src[4].nb[0]) : GT_NEG_INF;
    if (has_sink) {
        total_max = fmaxf(total_max, sink);
    }
    float den = 0.0f;
    for (int w = 0; w < GT_FA_WARPS; w++) {
        const float mw = part[w * (dv + 2)];
        if (mw != GT_NEG_INF) {
            den += part[w * (dv + 2) + 1] * expf(mw - total_max);
        }
    }
    if (has_sink) {
        den += expf(sink - total_max);
    }
    for (i64 i = threadIdx.x; i < dv; i += blockDim.x) {
        float num = 0.0f;
        for (int w = 0; w < GT_FA_WARPS; w++) {
            const float mw = part[w * (dv + 2)];
            if (mw != GT_NEG_INF) {
                num += part[w * (dv + 2) + 2 + i] * expf(mw - total_max);
            }
        }
        // A query that sees no key gets zeros, as on the CPU.
        const float out = den == 0.0f ? 0.0f : num / den;
        *(float*)(d.data + byte_offset4(d, i, iq2, iq1, iq3)) = out;
    }
}
