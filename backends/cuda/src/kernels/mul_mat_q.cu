// Quantized MUL_MAT: weights in any block type (unpacked 32 values at a time
// by quant_blocks.cuh) times Q8_1 activations (quantize.cu), integer dot
// products with __dp4a and the scales applied per half block:
//   sum_j w_j a_j = d_a * (sc * sum_j q_j a_j + off * sum_j a_j).
//
// Shared parameters: src0 the weights [k, m, ne02, ne03] (rows of whole
// blocks); src1.data the packed activations, src1.ne the F32 activations'
// shape [k, n, ne12, ne13]; dst [m, n, ne12, ne13] F32 with dense rows.
// i[0] = r2, i[1] = r3 (src0's batch broadcast), i[2] = chunks per row (k / 32).
// Needs quant_blocks.cuh and quantize.cu's BlockQ8_1.

// The dot of one unpacked weight chunk with one Q8_1 block.
__device__ __forceinline__ float dot_chunk(const int* q, const float* sc, const float* off, const BlockQ8_1* a) {
    const float da = f16_to_f32(a->d);
    float acc = 0.0f;
    for (int h = 0; h < 2; h++) {
        int sumi = 0;
        int suma = 0;
        for (int t = 0; t < 4; t++) {
            const int av = a->qs[4 * h + t];
            sumi = __dp4a(q[4 * h + t], av, sumi);
            suma = __dp4a(0x01010101, av, suma);
        }
        acc += da * (sc[h] * (float)sumi + off[h] * (float)suma);
    }
    return acc;
}

// Few columns (n <= GT_MMV_MAX_COLS): one warp per weight row, lanes over
// its chunks, every column at once. Grid (rows / GT_MMV_WARPS, batches).
extern "C" __global__ void mul_mat_vec_q(const Args a) {
    const Tensor& w = a.src[0];
    const Tensor& x = a.src[1];
    const Tensor& d = a.dst;
    const i64 r2 = a.i[0], r3 = a.i[1], chunks = a.i[2];
    const int lane = threadIdx.x % 32;
    const i64 row = (i64)blockIdx.x * GT_MMV_WARPS + threadIdx.x / 32;
    const i64 g = blockIdx.y;
    const i64 i2 = g % x.ne[2], i3 = g / x.ne[2];
    const int n = (int)x.ne[1];
    if (row >= w.ne[1]) {
        return;
    }
    const u8* wrow = (const u8*)(w.data + row * w.nb[1] + (i2 / r2) * w.nb[2] + (i3 / r3) * w.nb[3]);
    const BlockQ8_1* act = (const BlockQ8_1*)x.data + g * x.ne[1] * chunks;
    float acc[GT_MMV_MAX_COLS];
    for (int j = 0; j < GT_MMV_MAX_COLS; j++) {
        acc[j] = 0.0f;
    }
    for (i64 c = lane; c < chunks; c += 32) {
        int q[8];
        float sc[2];
        float off[2];
        unpack_chunk(w.type, wrow, (int)c, q, sc, off);
        for (int j = 0; j < GT_MMV_MAX_COLS; j++) {
            if (j < n) {
                acc[j] += dot_chunk(q, sc, off, act + j * chunks + c);
            }
        }
    }
    for (int j = 0; j < GT_MMV_MAX_COLS; j++) {
        if (j < n) {
            const float v = warp_sum(acc[j]);
            if (lane == 0) {
                *(float*)(d.data + row * 4 + j * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]) = v;
            }
        }
    }
}

// Many columns: tiles of GT_MMQ_BM rows by GT_MMQ_BN columns per block of
// 256 threads, GT_MMQ_KC chunks of the shared dimension per step, staged in
// shared memory; each thread accumulates 4 x 4 results.
// Grid (ceil(m / BM), ceil(n / BN), batches).
static_assert(GT_MMQ_BM == 64 && GT_MMQ_BN == 64, "mul_mat_q assigns 4 x 4 results of a 64 x 64 tile to each of 256 threads");
extern "C" __global__ void mul_mat_q(const Args a) {
    const Tensor& w = a.src[0];
    const Tensor& x = a.src[1];
    const Tensor& d = a.dst;
    const i64 r2 = a.i[0], r3 = a.i[1], chunks = a.i[2];
    const i64 m = w.ne[1], n = x.ne[1];
    const i64 g = blockIdx.z;
    const i64 i2 = g % x.ne[2], i3 = g / x.ne[2];
    const i64 row0 = (i64)blockIdx.x * GT_MMQ_BM;
    const i64 col0 = (i64)blockIdx.y * GT_MMQ_BN;
    const int t = threadIdx.x;

    __shared__ int wq[GT_MMQ_BM][GT_MMQ_KC * 8];
    __shared__ float wsc[GT_MMQ_BM][GT_MMQ_KC * 2];
    __shared__ float woff[GT_MMQ_BM][GT_MMQ_KC * 2];
    __shared__ int aq[GT_MMQ_BN][GT_MMQ_KC * 8];
    __shared__ int asum[GT_MMQ_BN][GT_MMQ_KC * 2];
    __shared__ float ad[GT_MMQ_BN][GT_MMQ_KC];

    const BlockQ8_1* act = (const BlockQ8_1*)x.data + g * n * chunks;
    float acc[4][4];
    for (int u = 0; u < 4; u++) {
        for (int v = 0; v < 4; v++) {
            acc[u][v] = 0.0f;
        }
    }
    for (i64 c0 = 0; c0 < chunks; c0 += GT_MMQ_KC) {
        // Stage: each thread unpacks one (row, chunk) of weights and loads
        // one (column, chunk) of activations; past the edges, zeros.
        for (int item = t; item < GT_MMQ_BM * GT_MMQ_KC; item += 256) {
            const int r = item / GT_MMQ_KC, kc = item % GT_MMQ_KC;
            const i64 row = row0 + r, c = c0 + kc;
            int q[8];
            float sc[2] = {0.0f, 0.0f};
            float off[2] = {0.0f, 0.0f};
            if (row < m && c < chunks) {
                const u8* wrow = (const u8*)(w.data + row * w.nb[1] + (i2 / r2) * w.nb[2] + (i3 / r3) * w.nb[3]);
                unpack_chunk(w.type, wrow, (int)c, q, sc, off);
            } else {
                for (int e = 0; e < 8; e++) {
                    q[e] = 0;
                }
            }
            for (int e = 0; e < 8; e++) {
                wq[r][kc * 8 + e] = q[e];
            }
            wsc[r][kc * 2] = sc[0];
            wsc[r][kc * 2 + 1] = sc[1];
            woff[r][kc * 2] = off[0];
            woff[r][kc * 2 + 1] = off[1];
        }
        for (int item = t; item < GT_MMQ_BN * GT_MMQ_KC; item += 256) {
            const int jj = item / GT_MMQ_KC, kc = item % GT_MMQ_KC;
            const i64 col = col0 + jj, c = c0 + kc;
            if (col < n && c < chunks) {
                const BlockQ8_1* blk = act + col * chunks + c;
                int s0 = 0;
                int s1 = 0;
                for (int e = 0; e < 8; e++) {
                    const int v = blk->qs[e];
                    aq[jj][kc * 8 + e] = v;
                    if (e < 4) {
                        s0 = __dp4a(0x01010101, v, s0);
                    } else {
                        s1 = __dp4a(0x01010101, v, s1);
                    }
                }
                asum[jj][kc * 2] = s0;
                asum[jj][kc * 2 + 1] = s1;
                ad[jj][kc] = f16_to_f32(blk->d);
            } else {
                for (int e = 0; e < 8; e++) {
                    aq[jj][kc * 8 + e] = 0;
                }
                asum[jj][kc * 2] = 0;
                asum[jj][kc * 2 + 1] = 0;
                ad[jj][kc] = 0.0f;
            }
        }
        __syncthreads();
        const int tr = t % 16, tc = t / 16;
        for (int kc = 0; kc < GT_MMQ_KC; kc++) {
            for (int h = 0; h < 2; h++) {
                for (int u = 0; u < 4; u++) {
                    const int r = tr + 16 * u;
                    const int* wv = &wq[r][kc * 8 + 4 * h];
                    const float s = wsc[r][kc * 2 + h], o = woff[r][kc * 2 + h];
                    for (int v = 0; v < 4; v++) {
                        const int jj = tc + 16 * v;
                        const int* av = &aq[jj][kc * 8 + 4 * h];
                        int sumi = 0;
                        sumi = __dp4a(wv[0], av[0], sumi);
                        sumi = __dp4a(wv[1], av[1], sumi);
                        sumi = __dp4a(wv[2], av[2], sumi);
                        sumi = __dp4a(wv[3], av[3], sumi);
                        acc[u][v] += ad[jj][kc] * (s * (float)sumi + o * (float)asum[jj][kc * 2 + h]);
                    }
                }
            }
        }
        __syncthreads();
    }
    const int tr = t % 16, tc = t / 16;
    for (int u = 0; u < 4; u++) {
        const i64 row = row0 + tr + 16 * u;
        for (int v = 0; v < 4; v++) {
            const i64 col = col0 + tc + 16 * v;
            if (row < m && col < n) {
                *(float*)(d.data + row * 4 + col * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]) = acc[u][v];
            }
        }
    }
}

// MUL_MAT_ID with quantized experts: one warp per (weight row, slot), lanes
// over the row's chunks. src0 the experts [k, m, n_expert]; src1.data the
// Q8_1 activations of every row of src1 in order, src1.ne its F32 shape
// [k, n_b, n_tokens]; src[2] the I32 ids [n_used, n_tokens]; dst [m,
// n_used, n_tokens] F32. i[2] = chunks per row. Grid (ceil(m /
// GT_MMV_WARPS), slots over y and z). An id outside the experts reads
// nothing: the slot is written as NaN and GT_ERR_EXPERT_ID set.
extern "C" __global__ void mul_mat_id_vec_q(const Args a) {
    const Tensor& w = a.src[0];
    const Tensor& x = a.src[1];
    const i64 chunks = a.i[2];
    const int lane = threadIdx.x % 32;
    ExpertSlot s;
    if (!expert_slot(a, s)) {
        return;
    }
    const i64 e = s.e, t = s.t;
    float* out = s.out;
    const u8* wrow = (const u8*)(w.data + s.row * w.nb[1] + (i64)s.id * w.nb[2]);
    const BlockQ8_1* act = (const BlockQ8_1*)x.data + ((e % x.ne[1]) + x.ne[1] * t) * chunks;
    float acc = 0.0f;
    for (i64 c = lane; c < chunks; c += 32) {
        int q[8];
        float sc[2];
        float off[2];
        unpack_chunk(w.type, wrow, (int)c, q, sc, off);
        acc += dot_chunk(q, sc, off, act + c);
    }
    acc = warp_sum(acc);
    if (lane == 0) {
        *out = acc;
    }
}
