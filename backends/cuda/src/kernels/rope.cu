// ROPE: rotary position embedding, NORMAL (adjacent pairs) and NEOX (pairs
// half a rotation apart), with YaRN and frequency factors. The angle is
// computed in f64, as the CPU does, so large positions keep their precision.
//
// src0 x [n0, heads, tokens, ne3]; src1 I32 positions (one per token);
// src2 optional F32 frequency factors. f[0] freq_base, f[1] freq_scale,
// f[2] ext_factor, f[3] attn_factor, f[4], f[5] YaRN's correction dims;
// i[0] n_dims, i[1] = 1 for NEOX, i[2] = 1 with factors.
// One thread per rotated pair or passed-through element of a row.
extern "C" __global__ void rope(const Args a) {
    const Tensor& x = a.src[0];
    const Tensor& pos = a.src[1];
    const Tensor& ff = a.src[2];
    const Tensor& d = a.dst;
    const i64 n_dims = a.i[0];
    const bool neox = a.i[1] != 0;
    const bool factors = a.i[2] != 0;
    const i64 half = n_dims / 2;
    const i64 per_row = half + (x.ne[0] - n_dims);
    const i64 n = per_row * x.ne[1] * x.ne[2] * x.ne[3];
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        const i64 item = k % per_row;
        const i64 r = k / per_row;
        const i64 i1 = r % x.ne[1], i2 = (r / x.ne[1]) % x.ne[2], i3 = r / (x.ne[1] * x.ne[2]);
        if (item >= half) {
            const i64 i0 = n_dims + (item - half);
            const float v = load_f(x.data + byte_offset4(x, i0, i1, i2, i3), x.type);
            store_f(d.data + byte_offset4(d, i0, i1, i2, i3), d.type, v);
            continue;
        }
        const double position = (double)*(const int*)(pos.data + i2 * pos.nb[0]);
        const float factor = factors ? *(const float*)(ff.data + item * ff.nb[0]) : 1.0f;
        const double theta_scale = pow((double)a.f[0], -2.0 / (double)n_dims);
        const double theta_extrap = position * pow(theta_scale, (double)item) / (double)factor;
        const double theta_interp = (double)a.f[1] * theta_extrap;
        double theta = theta_interp;
        double mscale = (double)a.f[3];
        if (a.f[2] != 0.0f) {
            const float y = ((float)item - a.f[4]) / fmaxf(a.f[5] - a.f[4], 0.001f);
            const double ramp_mix = (double)((1.0f - fminf(fmaxf(y, 0.0f), 1.0f)) * a.f[2]);
            theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
            mscale *= 1.0 + 0.1 * log(1.0 / (double)a.f[1]);
        }
        const float c = (float)(cos(theta) * mscale);
        const float s = (float)(sin(theta) * mscale);
        const i64 ia = neox ? item : 2 * item;
        const i64 ib = neox ? item + half : 2 * item + 1;
        const float x0 = load_f(x.data + byte_offset4(x, ia, i1, i2, i3), x.type);
        const float x1 = load_f(x.data + byte_offset4(x, ib, i1, i2, i3), x.type);
        store_f(d.data + byte_offset4(d, ia, i1, i2, i3), d.type, x0 * c - x1 * s);
        store_f(d.data + byte_offset4(d, ib, i1, i2, i3), d.type, x0 * s + x1 * c);
    }
}
