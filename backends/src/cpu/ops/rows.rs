//! GET_ROWS (gather rows by I32 index: the embedding lookup) and SET_ROWS
//! (scatter F32 rows into a tensor by I32 index: the KV-cache store).
//! Indices are checked before any row moves: one out of range is an error
//! naming the index tensor.

use gantry_engine::{Context, DType, Error, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::cpu::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(a), Some(idx)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1)) else { return false };
    let plain = |t: DType| matches!(t, DType::F32 | DType::F16 | DType::BF16 | DType::I32);
    match d.op {
        Op::GetRows => {
            let out = if a.dtype == DType::I32 { DType::I32 } else { DType::F32 };
            plain(a.dtype) && idx.dtype == DType::I32 && d.dtype == out
        }
        _ => {
            a.dtype == DType::F32 && idx.dtype == DType::I32 && matches!(d.dtype, DType::F32 | DType::F16 | DType::BF16)
        }
    }
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let rows = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let idx_id = src(ctx, t, d, 1)?;
    let idx = Bound::src(ctx, idx_id)?;
    let dst = Bound::dst(ctx, t)?;
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

fn check_indices(ctx: &Context, idx: &Bound, idx_id: TensorId, limit: usize) -> Result<()> {
    for k in 0..idx.ne[2] {
        for j in 0..idx.ne[1] {
            for i in 0..idx.ne[0] {
                // SAFETY: the loops stay within the index tensor's shape.
                let v = unsafe { index(idx, i, j, k) };
                if v < 0 || v as usize >= limit {
                    return Err(Error::OutOfBounds(format!(
                        "row index {v} at [{i}, {j}, {k}] of {} is outside 0..{limit}",
                        ctx.describe(idx_id)
                    )));
                }
            }
        }
    }
    Ok(())
}

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
    check_indices(ctx, idx, idx_id, a.ne[1])?;
    let n0 = a.ne[0];
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
    check_indices(ctx, idx, idx_id, dst.ne[1])?;
    let n0 = b.ne[0];
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
                        dst.store_row(i1, i02, i03, tmp);
                    }
                }
            }
        }
    });
    Ok(())
}
