//! GET_ROWS (gather rows by I32 index: the embedding lookup) and SET_ROWS
//! (scatter F32 rows into a tensor by I32 index: the KV-cache store).
//! Indices are checked before any row moves: one out of range is an error
//! naming the index tensor.
//!
//! Quantized rows: GET_ROWS dequantizes rows of every quantized type
//! (exactly ggml's values), from repacked weights too; SET_ROWS quantizes into Q4_0, Q4_1, Q5_0, Q5_1
//! and Q8_0 with ggml's reference quantizer (exactly ggml's bytes).

use gantry_engine::quant::{dequantize_row, quantize_row};
use gantry_engine::{Context, DType, Error, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{repacked, shape_err, src, src_desc};
use crate::FirstError;
use crate::parallel::Par;
use crate::quant::repack::{GROUP_ROWS, RepackedMatrix, dequantize_repacked_row, repacked_size};

/// Quantized dtypes SET_ROWS and CPY write from F32 (the op builders' list).
pub const QUANT_TARGETS: [DType; 5] = [DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0];

/// Whether a tensor's rows are whole blocks, densely stored (always so for
/// plain dtypes with a unit element stride).
pub fn dense_blocks(d: &TensorDesc) -> bool {
    d.ne[0] <= d.dtype.block_size() || d.nb[0] == d.dtype.bytes_per_block()
}

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(a), Some(idx)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1)) else { return false };
    let plain = |t: DType| matches!(t, DType::F32 | DType::F16 | DType::BF16 | DType::I32);
    match d.op {
        Op::GetRows => {
            let out = if a.dtype == DType::I32 { DType::I32 } else { DType::F32 };
            let rows_ok = plain(a.dtype) || (a.dtype.is_quantized() && dense_blocks(a));
            rows_ok && idx.dtype == DType::I32 && d.dtype == out
        }
        _ => {
            let to_ok = matches!(d.dtype, DType::F32 | DType::F16 | DType::BF16)
                || (QUANT_TARGETS.contains(&d.dtype) && dense_blocks(d));
            a.dtype == DType::F32 && idx.dtype == DType::I32 && to_ok
        }
    }
}

/// The bytes of row `[i1, i2, i3]` of a quantized tensor with dense rows.
///
/// # Safety
/// The indices are within `t`'s shape, its rows are dense, `bytes` is its
/// row size, and nothing writes the row while the slice lives.
unsafe fn quant_row<'a>(t: &Bound, [i1, i2, i3]: [usize; 3], bytes: usize) -> &'a [u8] {
    // SAFETY: the caller's guarantee; the row lies inside the bound memory.
    unsafe { std::slice::from_raw_parts(t.row(i1, i2, i3), bytes) }
}

/// The bytes of row `[i1, i2, i3]` of a quantized tensor with dense rows, to write.
///
/// # Safety
/// As [`quant_row`], and no other access to the row while the slice lives.
pub(super) unsafe fn quant_row_mut<'a>(t: &Bound, [i1, i2, i3]: [usize; 3], bytes: usize) -> &'a mut [u8] {
    // SAFETY: the caller's guarantee.
    unsafe { std::slice::from_raw_parts_mut(t.row(i1, i2, i3), bytes) }
}

/// The row size of a quantized tensor, as an error naming the node when its
/// rows are not whole blocks.
pub fn quant_row_bytes(ctx: &Context, t: TensorId, d: &TensorDesc, q: &Bound) -> Result<usize> {
    q.dtype
        .row_size(q.ne[0])
        .filter(|_| q.ne[0].is_multiple_of(q.dtype.block_size()))
        .ok_or_else(|| shape_err(ctx, t, d, format!("{} rows of {} values are not whole blocks", q.dtype, q.ne[0])))
}

/// `Ok`, or an error naming the node when an item of its parallel loop
/// failed: `what` failed on how many items, and the first error.
pub fn check_failures(ctx: &Context, t: TensorId, d: &TensorDesc, failed: &FirstError, what: &str) -> Result<()> {
    match failed.take() {
        None => Ok(()),
        Some((n, first)) => Err(shape_err(ctx, t, d, format!("{what} failed on {n} rows, first: {first}"))),
    }
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let src0 = src(ctx, t, d, 0)?;
    let repacked = repacked::matrix(ctx, src0)?;
    let idx_id = src(ctx, t, d, 1)?;
    let idx = Bound::src(ctx, idx_id)?;
    let dst = Bound::dst(ctx, t)?;
    if let (Some(w), Op::GetRows) = (repacked, d.op) {
        return get_rows_repacked(ctx, t, d, w, (&idx, idx_id), &dst, par);
    }
    let rows = Bound::src(ctx, src0)?;
    match d.op {
        Op::GetRows => get_rows(ctx, t, d, &rows, &idx, idx_id, &dst, par),
        _ => set_rows(ctx, t, d, &rows, &idx, idx_id, &dst, par),
    }
}

/// The index at `[i, j, k]` of an I32 tensor, checked against `limit`.
///
/// # Safety
/// The indices are within `idx`'s shape.
unsafe fn index(idx: &Bound, i: usize, j: usize, k: usize) -> i32 {
    // SAFETY: the caller's guarantee; I32 elements are aligned (checked at binding).
    unsafe { *(idx.at(i, j, k, 0) as *const i32) }
}

/// Every index of `idx` inside `0..limit`, else an error naming `op` (the
/// kernel's only defence: the values come from the graph's data).
fn check_indices(ctx: &Context, op: &str, idx: &Bound, idx_id: TensorId, limit: usize) -> Result<()> {
    for k in 0..idx.ne[2] {
        for j in 0..idx.ne[1] {
            for i in 0..idx.ne[0] {
                // SAFETY: the loops stay within the index tensor's shape.
                let v = unsafe { index(idx, i, j, k) };
                if v < 0 || v as usize >= limit {
                    return Err(Error::OutOfBounds(format!(
                        "{op}: row index {v} at [{i}, {j}, {k}] of {} is outside 0..{limit}",
                        ctx.describe(idx_id)
                    )));
                }
            }
        }
    }
    Ok(())
}

#[expect(
    clippy::too_many_arguments,
    reason = "the node (context, id, description), its two bound sources, the index tensor for messages, the destination and the pool"
)]
fn get_rows(
    ctx: &Context,
    t: TensorId,
    d: &TensorDesc,
    a: &Bound,
    idx: &Bound,
    idx_id: TensorId,
    dst: &Bound,
    par: &Par<'_>,
) -> Result<()> {
    let expect = [a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2]];
    if dst.ne != expect || a.ne[2] != idx.ne[1] || a.ne[3] != idx.ne[2] || idx.ne[3] != 1 {
        return Err(shape_err(ctx, t, d, format!("rows {:?} by indices {:?} into {:?}", a.ne, idx.ne, dst.ne)));
    }
    check_indices(ctx, d.op.name(), idx, idx_id, a.ne[1])?;
    let n0 = a.ne[0];
    if a.dtype.is_quantized() {
        let bytes = quant_row_bytes(ctx, t, d, a)?;
        let failed = FirstError::default();
        par.for_each(dst.nrows(), n0, n0, |range, tmp| {
            for r in range {
                let [i10, i11, i12] = dst.row_index(r);
                // SAFETY: the index was checked above; rows are in range; this
                // thread owns row r of dst, which does not alias the source.
                unsafe {
                    let src = quant_row(a, [index(idx, i10, i11, i12) as usize, i11, i12], bytes);
                    if dst.rows_are_dense() {
                        let out = std::slice::from_raw_parts_mut(dst.row(i10, i11, i12) as *mut f32, n0);
                        failed.note(dequantize_row(a.dtype, src, out));
                    } else {
                        failed.note(dequantize_row(a.dtype, src, tmp));
                        dst.store_row(i10, i11, i12, tmp);
                    }
                }
            }
        });
        return check_failures(ctx, t, d, &failed, "dequantizing rows");
    }
    let same = a.dtype == dst.dtype && a.rows_are_dense() && dst.rows_are_dense();
    par.for_each(dst.nrows(), n0, n0, |range, tmp| {
        for r in range {
            let [i10, i11, i12] = dst.row_index(r);
            // SAFETY: the index was checked above; rows are in range; this thread
            // owns row r of dst, which does not alias the source.
            unsafe {
                let i01 = index(idx, i10, i11, i12) as usize;
                if same {
                    std::ptr::copy_nonoverlapping(a.row(i01, i11, i12), dst.row(i10, i11, i12), n0 * a.elem_size());
                } else if a.dtype == DType::I32 {
                    for i0 in 0..n0 {
                        *(dst.at(i0, i10, i11, i12) as *mut i32) = *(a.at(i0, i01, i11, i12) as *const i32);
                    }
                } else {
                    a.load_row(i01, i11, i12, tmp);
                    dst.store_row(i10, i11, i12, tmp);
                }
            }
        }
    });
    Ok(())
}

/// GET_ROWS from repacked weights (a 2-d matrix: the token embeddings
/// that are also the output matrix): each row dequantized out of its group.
fn get_rows_repacked(
    ctx: &Context,
    t: TensorId,
    d: &TensorDesc,
    w: RepackedMatrix<'_>,
    (idx, idx_id): (&Bound, TensorId),
    dst: &Bound,
    par: &Par<'_>,
) -> Result<()> {
    let expect = [w.k, idx.ne[0], idx.ne[1], idx.ne[2]];
    if dst.ne != expect || idx.ne[1] != 1 || idx.ne[2] != 1 || idx.ne[3] != 1 {
        return Err(shape_err(ctx, t, d, format!("rows [{}, {}] by indices {:?} into {:?}", w.k, w.m, idx.ne, dst.ne)));
    }
    check_indices(ctx, d.op.name(), idx, idx_id, w.m)?;
    let (n0, group_bytes) = (w.k, repacked_size(w.dtype, w.k, 1).unwrap_or(0));
    let failed = FirstError::default();
    par.for_each(dst.nrows(), n0, n0, |range, tmp| {
        for r in range {
            let [i10, i11, i12] = dst.row_index(r);
            // SAFETY: the index was checked above; rows are in range; this
            // thread owns row r of dst, which does not alias the weights.
            unsafe {
                let i01 = index(idx, i10, i11, i12) as usize;
                let group = &w.data[i01 / GROUP_ROWS * group_bytes..][..group_bytes];
                if dst.rows_are_dense() {
                    let out = std::slice::from_raw_parts_mut(dst.row(i10, i11, i12) as *mut f32, n0);
                    failed.note(dequantize_repacked_row(w.dtype, w.k, group, i01 % GROUP_ROWS, out));
                } else {
                    failed.note(dequantize_repacked_row(w.dtype, w.k, group, i01 % GROUP_ROWS, tmp));
                    dst.store_row(i10, i11, i12, tmp);
                }
            }
        }
    });
    check_failures(ctx, t, d, &failed, "dequantizing repacked rows")
}

#[expect(
    clippy::too_many_arguments,
    reason = "the node (context, id, description), its two bound sources, the index tensor for messages, the destination and the pool"
)]
fn set_rows(
    ctx: &Context,
    t: TensorId,
    d: &TensorDesc,
    b: &Bound,
    idx: &Bound,
    idx_id: TensorId,
    dst: &Bound,
    par: &Par<'_>,
) -> Result<()> {
    let fits = b.ne[0] == dst.ne[0]
        && b.ne[2] == dst.ne[2]
        && b.ne[3] == dst.ne[3]
        && idx.ne[0] == b.ne[1]
        && idx.ne[1] > 0
        && idx.ne[2] > 0
        && idx.ne[3] == 1
        && b.ne[2].is_multiple_of(idx.ne[1])
        && b.ne[3].is_multiple_of(idx.ne[2]);
    if !fits {
        return Err(shape_err(ctx, t, d, format!("rows {:?} by indices {:?} into {:?}", b.ne, idx.ne, dst.ne)));
    }
    check_indices(ctx, d.op.name(), idx, idx_id, dst.ne[1])?;
    let n0 = b.ne[0];
    let quant_bytes = if dst.dtype.is_quantized() { Some(quant_row_bytes(ctx, t, d, dst)?) } else { None };
    let failed = FirstError::default();
    // One thread, in order: two rows with the same index then land as they
    // would sequentially (the later one wins), with no race between threads.
    par.inline(n0, |tmp| {
        for i03 in 0..b.ne[3] {
            for i02 in 0..b.ne[2] {
                for i in 0..b.ne[1] {
                    // SAFETY: indices checked and in range.
                    unsafe {
                        let i1 = index(idx, i, i02 % idx.ne[1], i03 % idx.ne[2]) as usize;
                        b.load_row(i, i02, i03, tmp);
                        match quant_bytes {
                            Some(bytes) => {
                                failed.note(quantize_row(dst.dtype, tmp, quant_row_mut(dst, [i1, i02, i03], bytes)))
                            }
                            None => dst.store_row(i1, i02, i03, tmp),
                        }
                    }
                }
            }
        }
    });
    check_failures(ctx, t, d, &failed, "quantizing rows")
}
