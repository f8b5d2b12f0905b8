//! Row conversions for the ops that move quantized rows: GET_ROWS reads rows
//! of any quantized type as f32; CPY and SET_ROWS write f32 rows into
//! Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 (any quantized type works) with ggml's
//! reference quantizer, so a quantized KV cache holds exactly ggml's bytes.

use gantry_engine::quant::{dequantize_row, quantize_row};
use gantry_engine::{DType, Error, Result};

fn row_bytes(dtype: DType, n: usize, op: &'static str) -> Result<usize> {
    if !dtype.is_quantized() {
        return Err(Error::UnsupportedDType { what: format!("{op} quantized rows"), dtype });
    }
    dtype.row_size(n).ok_or_else(|| Error::InvalidOp {
        op,
        reason: format!("rows of {n} values are not a whole number of {dtype} blocks of {}", dtype.block_size()),
    })
}

/// Dequantizes source rows `rows[i]` (each `n` values of `dtype`, row `r` at
/// byte `r · src_stride` of `src`) into `dst` row `i` (at `i · dst_stride`).
///
/// Errors on a row length that is not a whole number of blocks, a row index
/// past `src`, or a destination row past `dst`.
pub fn dequantize_rows(
    dtype: DType,
    src: &[u8],
    src_stride: usize,
    n: usize,
    rows: impl IntoIterator<Item = usize>,
    dst: &mut [f32],
    dst_stride: usize,
) -> Result<()> {
    let bytes = row_bytes(dtype, n, "GET_ROWS")?;
    for (i, r) in rows.into_iter().enumerate() {
        let s = r.checked_mul(src_stride).and_then(|s| src.get(s..s.checked_add(bytes)?)).ok_or_else(|| {
            Error::OutOfBounds(format!(
                "GET_ROWS: {dtype} row {r} (stride {src_stride}, {bytes} bytes) is past the {} source bytes",
                src.len()
            ))
        })?;
        let dst_len = dst.len();
        let d = i.checked_mul(dst_stride).and_then(|o| dst.get_mut(o..o.checked_add(n)?)).ok_or_else(|| {
            Error::OutOfBounds(format!("GET_ROWS: destination row {i} (stride {dst_stride}) is past {dst_len} values"))
        })?;
        dequantize_row(dtype, s, d)?;
    }
    Ok(())
}

/// Quantizes `rows` f32 rows of `n` values (row `i` at `i · src_stride` of
/// `src`) into `dtype` rows of `dst` (row `i` at byte `dst_rows[i] · dst_stride`)
/// with ggml's reference quantizer.
///
/// Errors on a row length that is not a whole number of blocks or rows past
/// either buffer.
pub fn quantize_rows_ref(
    dtype: DType,
    src: &[f32],
    src_stride: usize,
    n: usize,
    dst_rows: impl IntoIterator<Item = usize>,
    dst: &mut [u8],
    dst_stride: usize,
) -> Result<()> {
    let bytes = row_bytes(dtype, n, "SET_ROWS")?;
    for (i, r) in dst_rows.into_iter().enumerate() {
        let s = i.checked_mul(src_stride).and_then(|o| src.get(o..o.checked_add(n)?)).ok_or_else(|| {
            Error::OutOfBounds(format!("SET_ROWS: source row {i} (stride {src_stride}) is past {} values", src.len()))
        })?;
        let dst_len = dst.len();
        let d = r.checked_mul(dst_stride).and_then(|o| dst.get_mut(o..o.checked_add(bytes)?)).ok_or_else(|| {
            Error::OutOfBounds(format!(
                "SET_ROWS: {dtype} row {r} (stride {dst_stride}, {bytes} bytes) is past the {dst_len} destination bytes"
            ))
        })?;
        quantize_row(dtype, s, d)?;
    }
    Ok(())
}
