//! SOLVE_TRI: `A X = B` for lower-triangular `A` by forward substitution.
//! As in ggml, the unit of work is one right-hand-side column of one
//! batch: a task solves whole columns, each reading only what it wrote.

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    (0..2).all(|i| src_desc(ctx, d, i).is_some_and(|s| s.dtype == DType::F32)) && d.dtype == DType::F32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let b = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    let n = a.ne[0];
    // Checked again: the loops index A and B by X's shape.
    if a.ne != [n, n, dst.ne[2], dst.ne[3]] || b.ne != dst.ne || dst.ne[1] != n {
        return Err(shape_err(ctx, t, d, format!("A {:?} with B {:?}", a.ne, b.ne)));
    }
    let k = dst.ne[0];
    let n_batch = dst.ne[2] * dst.ne[3];
    par.for_each(n_batch * k, n * n / 2 + 1, 0, |units, _| {
        for u in units {
            let (col, batch) = (u % k, u / k);
            let (i2, i3) = (batch % dst.ne[2], batch / dst.ne[2]);
            for i in 0..n {
                // SAFETY: every index below is within the shapes checked
                // above; X's column `col` of this batch is written by this
                // task alone, and its rows t < i were written before.
                unsafe {
                    let mut sum = 0.0f32;
                    for j in 0..i {
                        sum += a.get(j, i, i2, i3) * dst.get(col, j, i2, i3);
                    }
                    let x = (b.get(col, i, i2, i3) - sum) / a.get(i, i, i2, i3);
                    dst.set(col, i, i2, i3, x);
                }
            }
        }
    });
    Ok(())
}
