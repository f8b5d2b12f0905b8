// The small ops, mirroring the CPU kernels (backends/cpu/src/ops/
// fill_tri.rs, set_acc.rs, add1.rs, count_equal.rs, generate.rs): one
// thread per result element (grid-stride) unless said otherwise.

// FILL: every element of dst (F32 / F16) = f[0].
extern "C" __global__ void fill(const Args a) {
    const Tensor& d = a.dst;
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        store_f(d.data + byte_offset(d, idx), d.type, a.f[0]);
    }
}

// TRI: src0 where element [i0, i1] is kept, else 0; i[0] the kind (ggml's
// order: 0 i0 >= i1, 1 i0 > i1, 2 i0 <= i1, 3 i0 < i1).
extern "C" __global__ void tri(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const int kind = (int)a.i[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const i64 i0 = idx[0], i1 = idx[1];
        const bool keep = kind == 0 ? i0 >= i1 : (kind == 1 ? i0 > i1 : (kind == 2 ? i0 <= i1 : i0 < i1));
        const float v = keep ? load_f(s.data + byte_offset(s, idx), s.type) : 0.0f;
        store_f(d.data + byte_offset(d, idx), d.type, v);
    }
}

// DIAG: src0 [n, 1, ...] as diagonal matrices dst [n, n, ...].
extern "C" __global__ void diag(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const float v = idx[0] == idx[1] ? load_f(s.data + byte_offset4(s, idx[1], 0, idx[2], idx[3]), s.type) : 0.0f;
        store_f(d.data + byte_offset(d, idx), d.type, v);
    }
}

// SET / ACC, first step: dst = src0, element by element (same dtype: the
// bytes copied, so I32 stays exact).
extern "C" __global__ void copy_same(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const int size = elem_size(d.type);
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        copy_elem(d.data + byte_offset(d, idx), s.data + byte_offset(s, idx), size);
    }
}

// SET / ACC, second step, one thread per element of src1: its element of
// the view of dst at byte i[0] with byte strides i[1], i[2], i[3] (dim 0
// dense) written over (i[4] = 0, SET: bytes copied) or added to (i[4] = 1,
// ACC, F32). The plan checked that the view's elements lie inside dst and
// are distinct, so no two threads touch one element.
extern "C" __global__ void set_view(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& b = a.src[1];
    const int size = elem_size(d.type);
    const bool add = a.i[4] != 0;
    const i64 n = nelements(b);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, b.ne, idx);
        char* p = d.data + a.i[0] + idx[0] * size + idx[1] * a.i[1] + idx[2] * a.i[2] + idx[3] * a.i[3];
        const char* q = b.data + byte_offset(b, idx);
        if (add) {
            *(float*)p = *(const float*)p + *(const float*)q;
        } else {
            copy_elem(p, q, size);
        }
    }
}

// ADD1: dst = src0 + the one element of src1.
extern "C" __global__ void add1(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const float v = load_f(a.src[1].data, a.src[1].type);
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        store_f(d.data + byte_offset(d, idx), d.type, load_f(s.data + byte_offset(s, idx), s.type) + v);
    }
}

// COUNT_EQUAL: one block counts the positions where the I32 src0 and src1
// are equal (each thread a share, then the block's sum in integers) and
// thread 0 writes the I32 result.
extern "C" __global__ void count_equal(const Args a) {
    __shared__ long long partial[32];
    const Tensor& x = a.src[0];
    const Tensor& y = a.src[1];
    const i64 n = nelements(x);
    long long count = 0;
    for (i64 k = threadIdx.x; k < n; k += blockDim.x) {
        i64 idx[4];
        unravel(k, x.ne, idx);
        count += *(const int*)(x.data + byte_offset(x, idx)) == *(const int*)(y.data + byte_offset(y, idx)) ? 1 : 0;
    }
    for (int o = 16; o > 0; o >>= 1) {
        count += __shfl_xor_sync(0xffffffffu, count, o);
    }
    if (threadIdx.x % 32 == 0) {
        partial[threadIdx.x / 32] = count;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        long long total = 0;
        for (int w = 0; w < (int)(blockDim.x / 32); w++) {
            total += partial[w];
        }
        *(int*)a.dst.data = (int)total;
    }
}

// ARANGE: element i0 of each row = f[0] + f[1] * i0 (start, step), the
// product rounded before the sum, as the CPU.
extern "C" __global__ void arange(const Args a) {
    const Tensor& d = a.dst;
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        *(float*)(d.data + byte_offset(d, idx)) = __fadd_rn(a.f[0], __fmul_rn(a.f[1], (float)idx[0]));
    }
}

// TIMESTEP_EMBEDDING: dst [dim, n] from the F32 timesteps src0 [n]: with
// half = dim / 2, element j < half is cos(t * e^(-ln(max_period) * j /
// half)), element half + j its sine, and an odd dim's last element 0.
// f[0] = ln(max_period) (computed on the host as the CPU does), i[0] = half.
extern "C" __global__ void timestep_embedding(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& ts = a.src[0];
    const float log_period = a.f[0];
    const i64 half = a.i[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const i64 i0 = idx[0];
        float v = 0.0f;
        if (i0 < 2 * half) {
            const i64 j = i0 < half ? i0 : i0 - half;
            const float t = *(const float*)(ts.data + idx[1] * ts.nb[0]);
            const float arg = __fmul_rn(t, expf(__fmul_rn(-log_period, (float)j) / (float)half));
            v = i0 < half ? cosf(arg) : sinf(arg);
        }
        *(float*)(d.data + byte_offset(d, idx)) = v;
    }
}
