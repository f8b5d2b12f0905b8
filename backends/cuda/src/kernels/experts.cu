// Mixture-of-experts and routing kernels: MUL_MAT_ID with float experts,
// ADD_ID, ARGSORT / TOP_K and CUMSUM. Ids are checked before anything is
// read with them: a bad one writes NaN and sets GT_ERR_EXPERT_ID.

#define GT_NAN __int_as_float(0x7fc00000)

// MUL_MAT_ID with F32 / F16 / BF16 experts: one warp per (weight row,
// slot), lanes over the row. src0 [k, m, n_expert], src1 F32 [k, n_b,
// n_tokens], src[2] I32 ids [n_used, n_tokens], dst F32 [m, n_used,
// n_tokens]. Grid (ceil(m / GT_MMV_WARPS), slots over y and z).
extern "C" __global__ void mul_mat_id_f(const Args a) {
    const Tensor& w = a.src[0];
    const Tensor& x = a.src[1];
    const int lane = threadIdx.x % 32;
    ExpertSlot s;
    if (!expert_slot(a, s)) {
        return;
    }
    const i64 e = s.e, t = s.t;
    float* out = s.out;
    const char* wrow = w.data + s.row * w.nb[1] + (i64)s.id * w.nb[2];
    const char* xrow = x.data + (e % x.ne[1]) * x.nb[1] + t * x.nb[2];
    float acc = 0.0f;
    for (i64 i = lane; i < w.ne[0]; i += 32) {
        acc += load_f(wrow + i * w.nb[0], w.type) * *(const float*)(xrow + i * x.nb[0]);
    }
    acc = warp_sum(acc);
    if (lane == 0) {
        *out = acc;
    }
}

// dst[i, e, t] = src0[i, e, t] + src1[i, ids[e, t]], F32; ids in src[2].
extern "C" __global__ void add_id(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const Tensor& b = a.src[1];
    const Tensor& ids = a.src[2];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const int id = *(const int*)(ids.data + idx[1] * ids.nb[0] + idx[2] * ids.nb[1]);
        float v;
        if (id < 0 || id >= b.ne[1]) {
            v = GT_NAN;
            report_error(a.err, GT_ERR_EXPERT_ID);
        } else {
            v = *(const float*)(s.data + byte_offset(s, idx)) + *(const float*)(b.data + idx[0] * b.nb[0] + id * b.nb[1]);
        }
        *(float*)(d.data + byte_offset(d, idx)) = v;
    }
}

// The f32's bits as an unsigned integer in the value's total order
// (Rust's f32::total_cmp).
__device__ __forceinline__ u32 sort_key(float v) {
    const u32 b = __float_as_uint(v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// ARGSORT and TOP_K by rank: each source element counts the elements of its
// row that sort before it (i[0] = 1 descending; ties by index), then writes
// its index at its rank if that is below dst.ne[0] (k for TOP_K).
extern "C" __global__ void sort_rows(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const bool desc = a.i[0] != 0;
    const i64 n = nelements(s);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, s.ne, idx);
        const char* row = s.data + byte_offset4(s, 0, idx[1], idx[2], idx[3]);
        const u32 mine = sort_key(*(const float*)(row + idx[0] * s.nb[0]));
        i64 rank = 0;
        for (i64 j = 0; j < s.ne[0]; j++) {
            const u32 other = sort_key(*(const float*)(row + j * s.nb[0]));
            const bool ahead = desc ? other > mine : other < mine;
            if (ahead || (other == mine && j < idx[0])) {
                rank++;
            }
        }
        if (rank < d.ne[0]) {
            *(int*)(d.data + byte_offset4(d, rank, idx[1], idx[2], idx[3])) = (int)idx[0];
        }
    }
}

// CUMSUM: one thread per row, its running sum in order (in double, as the
// CPU backend keeps it).
extern "C" __global__ void cumsum(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const i64 rows = s.ne[1] * s.ne[2] * s.ne[3];
    for (i64 r = grid_start(); r < rows; r += grid_stride()) {
        const i64 i1 = r % s.ne[1], i2 = (r / s.ne[1]) % s.ne[2], i3 = r / (s.ne[1] * s.ne[2]);
        const char* src = s.data + byte_offset4(s, 0, i1, i2, i3);
        char* dst = d.data + byte_offset4(d, 0, i1, i2, i3);
        double acc = 0.0;
        for (i64 i = 0; i < s.ne[0]; i++) {
            acc += (double)*(const float*)(src + i * s.nb[0]);
            *(float*)(dst + i * d.nb[0]) = (float)acc;
        }
    }
}
