//! CUMSUM: the inclusive running sum along each row, accumulated in f64 so
//! a long row's last sums keep f32 precision.

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|a| a.dtype == DType::F32) && d.dtype == DType::F32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    if a.ne != dst.ne {
        return Err(shape_err(ctx, t, d, format!("source shape {:?} differs from the result's", a.ne)));
    }
    let n0 = a.ne[0];
    par.for_each(a.nrows(), 2 * n0, n0, |rows, row| {
        for r in rows {
            let [i1, i2, i3] = a.row_index(r);
            // SAFETY: the indices are within both shapes; this task alone
            // writes row r of dst, after reading all of a's row r.
            unsafe { a.load_row(i1, i2, i3, row) };
            let mut acc = 0f64;
            for v in row.iter_mut() {
                acc += f64::from(*v);
                *v = acc as f32;
            }
            // SAFETY: as above.
            unsafe { dst.store_row(i1, i2, i3, row) };
        }
    });
    Ok(())
}
