//! Reductions: SUM, SUM_ROWS, MEAN (accumulated in f64, as ggml does) and
//! ARGMAX (the first index of the largest element).

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{is_float, shape_err, src, src_desc};
use crate::parallel::Par;
use crate::simd;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let Some(s) = src_desc(ctx, d, 0) else { return false };
    let out = match d.op {
        Op::Sum | Op::SumRows => s.dtype,
        Op::Mean => DType::F32,
        _ => DType::I32,
    };
    is_float(s.dtype) && d.dtype == out
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let s = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let n0 = s.ne[0];
    match d.op {
        Op::Sum => {
            if dst.nelements() != 1 {
                return Err(shape_err(ctx, t, d, "the result must have one element"));
            }
            // One pass on one thread: memory bound, and the sum stays deterministic.
            let total = par.inline(n0, |row| {
                let mut acc = 0f64;
                for r in 0..s.nrows() {
                    let [i1, i2, i3] = s.row_index(r);
                    // SAFETY: indices in range; the source is only read.
                    unsafe { s.load_row(i1, i2, i3, row) };
                    acc += simd::sum_f64(row);
                }
                acc
            });
            // SAFETY: the single element of the result.
            unsafe { dst.set(0, 0, 0, 0, total as f32) };
        }
        Op::SumRows | Op::Mean | Op::Argmax => {
            let expect = if d.op == Op::Argmax { [s.ne[1], 1, 1, 1] } else { [1, s.ne[1], s.ne[2], s.ne[3]] };
            if dst.ne != expect || (d.op == Op::Argmax && (s.ne[2] != 1 || s.ne[3] != 1)) {
                return Err(shape_err(ctx, t, d, format!("result {:?} does not fit source {:?}", dst.ne, s.ne)));
            }
            let op = d.op;
            par.for_each(s.nrows(), n0, n0, |rows, row| {
                for r in rows {
                    let [i1, i2, i3] = s.row_index(r);
                    // SAFETY: indices in range; each row's result is written by
                    // the one thread that reduced it.
                    unsafe {
                        s.load_row(i1, i2, i3, row);
                        match op {
                            Op::SumRows => dst.set(0, i1, i2, i3, simd::sum_f64(row) as f32),
                            Op::Mean => dst.set(0, i1, i2, i3, (simd::sum_f64(row) / n0 as f64) as f32),
                            _ => *(dst.at(i1, 0, 0, 0) as *mut i32) = argmax(row) as i32,
                        }
                    }
                }
            });
        }
        _ => {}
    }
    Ok(())
}

/// The index of the first largest element (0 for an empty row or all NaN).
fn argmax(x: &[f32]) -> usize {
    let (mut best, mut idx) = (f32::NEG_INFINITY, 0);
    for (i, &v) in x.iter().enumerate() {
        if v > best {
            best = v;
            idx = i;
        }
    }
    idx
}
