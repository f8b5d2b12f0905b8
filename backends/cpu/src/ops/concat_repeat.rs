//! CONCAT (join two tensors along a dim) and REPEAT (tile a tensor to a
//! larger shape). Both only move elements, so they work on raw bytes for
//! every plain dtype, I32 included.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId, tensor::can_repeat};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

fn plain(t: DType) -> bool {
    matches!(t, DType::F32 | DType::F16 | DType::BF16 | DType::I32)
}

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let Some(a) = src_desc(ctx, d, 0) else { return false };
    let b_ok = match d.op {
        Op::Concat { .. } => src_desc(ctx, d, 1).is_some_and(|b| b.dtype == a.dtype),
        _ => true,
    };
    plain(a.dtype) && a.dtype == d.dtype && b_ok
}

/// Copies `n` elements from row `s_row` of `s` (from element `s0`) to row
/// `d_row` of `dst` (from element `d0`).
///
/// # Safety
/// Rows in range, `s0 + n <= s.ne[0]`, `d0 + n <= dst.ne[0]`, same dtype; no
/// other thread writes the destination row.
unsafe fn copy_run(s: &Bound, s_row: [usize; 3], s0: usize, dst: &Bound, d_row: [usize; 3], d0: usize, n: usize) {
    let size = s.elem_size();
    let [i1, i2, i3] = s_row;
    let [j1, j2, j3] = d_row;
    // SAFETY: the caller's guarantee.
    unsafe {
        if s.rows_are_dense() && dst.rows_are_dense() {
            std::ptr::copy(s.at(s0, i1, i2, i3), dst.at(d0, j1, j2, j3), n * size);
        } else {
            for k in 0..n {
                std::ptr::copy(s.at(s0 + k, i1, i2, i3), dst.at(d0 + k, j1, j2, j3), size);
            }
        }
    }
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let n0 = dst.ne[0];
    match d.op {
        Op::Concat { dim } => {
            let dim = dim as usize;
            let b = Bound::src(ctx, src(ctx, t, d, 1)?)?;
            let mut expect = a.ne;
            if dim < 4 {
                expect[dim] += b.ne[dim];
            }
            if dim >= 4 || dst.ne != expect || (0..4).any(|i| i != dim && a.ne[i] != b.ne[i]) {
                return Err(shape_err(ctx, t, d, format!("{:?} and {:?} along dim {dim}", a.ne, b.ne)));
            }
            par.for_each(dst.nrows(), n0, 0, |rows, _| {
                for r in rows {
                    let row = dst.row_index(r);
                    // SAFETY: every run stays inside its row (shapes checked above);
                    // this thread owns row r of dst.
                    unsafe {
                        if dim == 0 {
                            copy_run(&a, row, 0, &dst, row, 0, a.ne[0]);
                            copy_run(&b, row, 0, &dst, row, a.ne[0], b.ne[0]);
                        } else {
                            let mut at = row;
                            let k = dim - 1;
                            let from_a = at[k] < a.ne[dim];
                            if !from_a {
                                at[k] -= a.ne[dim];
                            }
                            copy_run(if from_a { &a } else { &b }, at, 0, &dst, row, 0, n0);
                        }
                    }
                }
            });
        }
        _ => {
            if !can_repeat(a.ne, dst.ne) {
                return Err(shape_err(ctx, t, d, format!("{:?} does not tile {:?}", a.ne, dst.ne)));
            }
            let m0 = a.ne[0];
            par.for_each(dst.nrows(), n0, 0, |rows, _| {
                for r in rows {
                    let row = dst.row_index(r);
                    let from = [row[0] % a.ne[1], row[1] % a.ne[2], row[2] % a.ne[3]];
                    for start in (0..n0).step_by(m0) {
                        // SAFETY: each run is one whole source row inside the
                        // destination row; this thread owns row r of dst.
                        unsafe { copy_run(&a, from, 0, &dst, row, start, m0) };
                    }
                }
            });
        }
    }
    Ok(())
}
