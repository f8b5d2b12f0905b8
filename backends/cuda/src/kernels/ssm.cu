// Mamba's state-space ops, mirroring the CPU kernels (backends/cpu/src/ops/
// ssm_conv.rs, ssm_scan.rs) loop for loop: SSM_CONV, one thread per result
// element; SSM_SCAN, one thread per state row (one (sequence, head, row)),
// which carries that row through every token of its sequence. Products and
// sums are rounded separately (__fmul_rn / __fadd_rn), as the CPU does
// them, so no FMA changes the result.

// SSM_CONV: dst[ch, tok, seq] = sum over k of sx[tok + k, ch, seq] * c[k, ch],
// in kernel order. src0 sx [d_conv - 1 + n_t, d_inner, n_s], src1 c
// [d_conv, d_inner], dst [d_inner, n_t, n_s] (shapes checked by the plan).
extern "C" __global__ void ssm_conv(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& sx = a.src[0];
    const Tensor& c = a.src[1];
    const i64 d_conv = c.ne[0];
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const i64 ch = idx[0], tok = idx[1], seq = idx[2];
        float sum = 0.0f;
        for (i64 j = 0; j < d_conv; j++) {
            const float v = *(const float*)(sx.data + byte_offset4(sx, tok + j, ch, seq, 0));
            const float w = *(const float*)(c.data + byte_offset4(c, j, ch, 0, 0));
            sum = __fadd_rn(sum, __fmul_rn(v, w));
        }
        *(float*)(d.data + byte_offset(d, idx)) = sum;
    }
}

// The CPU's softplus: x above 20 as is, else ln(1 + e^x).
__device__ __forceinline__ float ssm_softplus(float x) {
    return x > 20.0f ? x : log1pf(expf(x));
}

// SSM_SCAN. src0 the states s [nc = d_state, nr = head_dim, nh = n_head,
// n_states], src1 x [nr, nh, nt, ns], src2 dt [nh, nt, ns], src3 A [1 or nc,
// nh], src4 B and src5 C [nc, ng, nt, ns], src6 ids (I32, [ns]); dst the
// contiguous F32 result: y [nr, nh, nt, ns], then i[0] = K snapshots of the
// ns final states (snapshot `slot` is the state `slot` tokens before the
// end; those from before the first token are zeros). The thread of row
// (i3, h, i1) works on its row of snapshot 0 (the final state) in place.
// An id outside the states is never used to read: that row's y and
// snapshots are written as NaN and GT_ERR_STATE_ID is set.
extern "C" __global__ void ssm_scan(const Args a) {
    const Tensor& s0 = a.src[0];
    const Tensor& x = a.src[1];
    const Tensor& dt = a.src[2];
    const Tensor& A = a.src[3];
    const Tensor& B = a.src[4];
    const Tensor& C = a.src[5];
    const Tensor& ids = a.src[6];
    const i64 k_states = a.i[0];
    const i64 nc = s0.ne[0], nr = s0.ne[1], nh = s0.ne[2];
    const i64 nt = x.ne[2], ns = x.ne[3], ng = B.ne[1];
    const i64 y_len = nr * nh * nt * ns;
    const i64 state_len = nc * nr * nh;
    const bool mamba1 = A.ne[0] != 1;
    float* out = (float*)a.dst.data;
    const i64 rows = ns * nh * nr;
    for (i64 k = grid_start(); k < rows; k += grid_stride()) {
        const i64 i1 = k % nr, h = (k / nr) % nh, i3 = k / (nr * nh);
        const i64 g = h / (nh / ng);
        // Row i1 of head h in sequence i3's state, in snapshot `slot`.
        const i64 row = y_len + i3 * state_len + i1 * nc + h * nc * nr;
        const i64 slot_stride = ns * state_len;
        float* st = out + row;
        const int id = *(const int*)(ids.data + i3 * ids.nb[0]);
        if (id < 0 || (i64)id >= s0.ne[3]) {
            const float nan = __int_as_float(0x7fc00000);
            for (i64 i2 = 0; i2 < nt; i2++) {
                out[i1 + nr * (h + nh * (i2 + nt * i3))] = nan;
            }
            for (i64 slot = 0; slot < k_states; slot++) {
                for (i64 i0 = 0; i0 < nc; i0++) {
                    out[row + slot * slot_stride + i0] = nan;
                }
            }
            report_error(a.err, GT_ERR_STATE_ID);
            continue;
        }
        for (i64 i0 = 0; i0 < nc; i0++) {
            st[i0] = *(const float*)(s0.data + byte_offset4(s0, i0, i1, h, id));
        }
        for (i64 i2 = 0; i2 < nt; i2++) {
            const float dt_sp = ssm_softplus(*(const float*)(dt.data + byte_offset4(dt, h, i2, i3, 0)));
            const float xv = *(const float*)(x.data + byte_offset4(x, i1, h, i2, i3));
            const float x_dt = __fmul_rn(xv, dt_sp);
            const float da2 =
                mamba1 ? 0.0f : expf(__fmul_rn(dt_sp, *(const float*)(A.data + byte_offset4(A, 0, h, 0, 0))));
            float sum = 0.0f;
            for (i64 i0 = 0; i0 < nc; i0++) {
                const float da =
                    mamba1 ? expf(__fmul_rn(dt_sp, *(const float*)(A.data + byte_offset4(A, i0, h, 0, 0)))) : da2;
                const float bv = *(const float*)(B.data + byte_offset4(B, i0, g, i2, i3));
                const float cv = *(const float*)(C.data + byte_offset4(C, i0, g, i2, i3));
                const float v = __fadd_rn(__fmul_rn(st[i0], da), __fmul_rn(bv, x_dt));
                st[i0] = v;
                sum = __fadd_rn(sum, __fmul_rn(v, cv));
            }
            out[i1 + nr * (h + nh * (i2 + nt * i3))] = sum;
            const i64 slot = nt - 1 - i2;
            if (slot > 0 && slot < k_states) {
                for (i64 i0 = 0; i0 < nc; i0++) {
                    out[row + slot * slot_stride + i0] = st[i0];
                }
            }
        }
        for (i64 slot = nt > 1 ? nt : 1; slot < k_states; slot++) {
            for (i64 i0 = 0; i0 < nc; i0++) {
                out[row + slot * slot_stride + i0] = 0.0f;
            }
        }
    }
}
