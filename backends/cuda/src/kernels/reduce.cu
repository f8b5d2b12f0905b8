// Reductions: SUM, SUM_ROWS and MEAN accumulate in f64 as the CPU does;
// ARGMAX returns the first index of the largest element (NaN never wins).

// The whole of src0 into dst's one element; one block of 1024 threads.
extern "C" __global__ void sum_all(const Args a) {
    __shared__ double scratch[32];
    const Tensor& s = a.src[0];
    const i64 n = nelements(s);
    double acc = 0.0;
    for (i64 k = threadIdx.x; k < n; k += blockDim.x) {
        i64 idx[4];
        unravel(k, s.ne, idx);
        acc += (double)load_f(s.data + byte_offset(s, idx), s.type);
    }
    acc = block_sum_double(acc, scratch);
    if (threadIdx.x == 0) {
        store_f(a.dst.data, a.dst.type, (float)acc);
    }
}

// One block per row r of src0: dst[0, i1, i2, i3] = sum (i[0] = 0) or mean (i[0] = 1).
extern "C" __global__ void sum_rows(const Args a) {
    __shared__ double scratch[32];
    const Tensor& s = a.src[0];
    const Tensor& d = a.dst;
    const i64 r = blockIdx.x;
    const i64 i1 = r % s.ne[1], i2 = (r / s.ne[1]) % s.ne[2], i3 = r / (s.ne[1] * s.ne[2]);
    double acc = 0.0;
    for (i64 i0 = threadIdx.x; i0 < s.ne[0]; i0 += blockDim.x) {
        acc += (double)load_f(s.data + byte_offset4(s, i0, i1, i2, i3), s.type);
    }
    acc = block_sum_double(acc, scratch);
    if (threadIdx.x == 0) {
        const double v = a.i[0] != 0 ? acc / (double)s.ne[0] : acc;
        store_f(d.data + byte_offset4(d, 0, i1, i2, i3), d.type, (float)v);
    }
}

// One block per row i1 of the matrix src0: dst[i1] (I32) = the first index of the row's maximum.
extern "C" __global__ void argmax(const Args a) {
    __shared__ float best_v[32];
    __shared__ int best_i[32];
    const Tensor& s = a.src[0];
    const i64 i1 = blockIdx.x;
    float best = GT_NEG_INF;
    int at = 0x7fffffff;
    for (i64 i0 = threadIdx.x; i0 < s.ne[0]; i0 += blockDim.x) {
        const float v = load_f(s.data + byte_offset4(s, i0, i1, 0, 0), s.type);
        if (v > best) {
            best = v;
            at = (int)i0;
        }
    }
    // Larger value wins; among equal values the smaller index.
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, at, o);
        if (ov > best || (ov == best && oi < at)) {
            best = ov;
            at = oi;
        }
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        best_v[warp] = best;
        best_i[warp] = at;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)(blockDim.x / 32); w++) {
            if (best_v[w] > best || (best_v[w] == best && best_i[w] < at)) {
                best = best_v[w];
                at = best_i[w];
            }
        }
        *(int*)(a.dst.data + i1 * a.dst.nb[0]) = at == 0x7fffffff ? 0 : at;
    }
}
