// Kernels that move elements: CPY / CONT / DUP between plain dtypes, block
// copies of quantized rows, CONCAT, REPEAT, GET_ROWS from plain rows and
// SET_ROWS into F32 / F16 / BF16 rows. Same-dtype moves copy bytes (exact);
// conversions go through f32 as in the CPU backend.

// Element k of src0 (logical order) becomes element k of dst.
extern "C" __global__ void cpy(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const i64 n = nelements(d);
    const bool same = s.type == d.type;
    const int size = elem_size(d.type);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 si[4];
        i64 di[4];
        unravel(k, s.ne, si);
        unravel(k, d.ne, di);
        const char* from = s.data + byte_offset(s, si);
        char* to = d.data + byte_offset(d, di);
        if (same) {
            copy_elem(to, from, size);
        } else {
            store_f(to, d.type, load_f(from, s.type));
        }
    }
}

// Rows of whole blocks, row r of src0 to row r of dst (logical row order);
// i[0] = bytes per row. One thread per byte.
extern "C" __global__ void copy_block_rows(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const i64 row_bytes = a.i[0];
    const i64 rows = d.ne[1] * d.ne[2] * d.ne[3];
    const i64 n = rows * row_bytes;
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        const i64 r = k / row_bytes;
        const i64 b = k % row_bytes;
        const i64 s1 = r % s.ne[1], s2 = (r / s.ne[1]) % s.ne[2], s3 = r / (s.ne[1] * s.ne[2]);
        const i64 d1 = r % d.ne[1], d2 = (r / d.ne[1]) % d.ne[2], d3 = r / (d.ne[1] * d.ne[2]);
        d.data[d1 * d.nb[1] + d2 * d.nb[2] + d3 * d.nb[3] + b] = s.data[s1 * s.nb[1] + s2 * s.nb[2] + s3 * s.nb[3] + b];
    }
}

// dst = src0 and src1 joined along dim i[0].
extern "C" __global__ void concat(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& x = a.src[0];
    const Tensor& y = a.src[1];
    const int dim = (int)a.i[0];
    const int size = elem_size(d.type);
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        char* to = d.data + byte_offset(d, idx);
        if (idx[dim] < x.ne[dim]) {
            copy_elem(to, x.data + byte_offset(x, idx), size);
        } else {
            idx[dim] -= x.ne[dim];
            copy_elem(to, y.data + byte_offset(y, idx), size);
        }
    }
}

// dst = src0 tiled: element i of dst is element i % ne of src0.
extern "C" __global__ void repeat(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const int size = elem_size(d.type);
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const char* from =
            s.data + byte_offset4(s, idx[0] % s.ne[0], idx[1] % s.ne[1], idx[2] % s.ne[2], idx[3] % s.ne[3]);
        copy_elem(d.data + byte_offset(d, idx), from, size);
    }
}

// dst[i0, i10, i11, i12] = src0[i0, idx[i10, i11, i12], i11, i12]; an index
// outside src0's rows sets GT_ERR_ROW_INDEX and leaves its row unwritten.
extern "C" __global__ void get_rows(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const Tensor& ix = a.src[1];
    const bool same = s.type == d.type;
    const int size = elem_size(d.type);
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const int r = *(const int*)(ix.data + byte_offset4(ix, idx[1], idx[2], idx[3], 0));
        if (r < 0 || r >= s.ne[1]) {
            report_error(a.err, GT_ERR_ROW_INDEX);
            continue;
        }
        const char* from = s.data + byte_offset4(s, idx[0], r, idx[2], idx[3]);
        char* to = d.data + byte_offset(d, idx);
        if (same) {
            copy_elem(to, from, size);
        } else {
            store_f(to, d.type, load_f(from, s.type));
        }
    }
}

// dst[:, idx[i, i02 % n1, i03 % n2], i02, i03] = src0[:, i, i02, i03].
// Block (x, i02, i03) walks the rows i in order for its columns, so two rows
// with the same index land as on the CPU: the later one wins.
extern "C" __global__ void set_rows(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const Tensor& ix = a.src[1];
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 i02 = blockIdx.y;
    const i64 i03 = blockIdx.z;
    if (c >= s.ne[0]) {
        return;
    }
    for (i64 i = 0; i < s.ne[1]; i++) {
        const int r = *(const int*)(ix.data + byte_offset4(ix, i, i02 % ix.ne[1], i03 % ix.ne[2], 0));
        if (r < 0 || r >= d.ne[1]) {
            report_error(a.err, GT_ERR_ROW_INDEX);
            continue;
        }
        const float v = load_f(s.data + byte_offset4(s, c, i, i02, i03), s.type);
        store_f(d.data + byte_offset4(d, c, r, i02, i03), d.type, v);
    }
}
