// GET_ROWS from quantized rows (every block type): each result value is
// dequantized on its own with the CPU's formula (quant_blocks.cuh), so the
// rows match the CPU's exactly. Needs quant_blocks.cuh.

// dst[i0, i10, i11, i12] = row idx[i10, i11, i12] of src0 (batch i11, i12),
// value i0; an index outside src0's rows sets GT_ERR_ROW_INDEX.
extern "C" __global__ void get_rows_q(const Args a) {
    const Tensor& d = a.dst;
    const Tensor& s = a.src[0];
    const Tensor& ix = a.src[1];
    const int values = block_values(s.type);
    const int bytes = block_bytes(s.type);
    const i64 n = nelements(d);
    for (i64 k = grid_start(); k < n; k += grid_stride()) {
        i64 idx[4];
        unravel(k, d.ne, idx);
        const int r = *(const int*)(ix.data + byte_offset4(ix, idx[1], idx[2], idx[3], 0));
        if (r < 0 || r >= s.ne[1]) {
            report_error(a.err, GT_ERR_ROW_INDEX);
            continue;
        }
        const u8* row = (const u8*)(s.data + r * s.nb[1] + idx[2] * s.nb[2] + idx[3] * s.nb[3]);
        const u8* block = row + (idx[0] / values) * bytes;
        store_f(d.data + byte_offset(d, idx), d.type, dequant_value(s.type, block, (int)(idx[0] % values)));
    }
}
