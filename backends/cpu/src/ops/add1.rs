//! ADD1: the one element of `src1` added to every element of `src0`.

use gantry_engine::{Context, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{is_float, shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|a| is_float(a.dtype) && a.dtype == d.dtype)
        && src_desc(ctx, d, 1).is_some_and(|b| is_float(b.dtype))
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let b = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    if a.ne != dst.ne || b.nelements() != 1 {
        return Err(shape_err(ctx, t, d, format!("{:?} plus {:?}", a.ne, b.ne)));
    }
    // SAFETY: b holds exactly one element.
    let v = unsafe { b.get(0, 0, 0, 0) };
    let n0 = dst.ne[0];
    par.for_each(dst.nrows(), n0, n0, |rows, row| {
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            // SAFETY: the same row of both, in range; this task alone writes it.
            unsafe {
                a.load_row(i1, i2, i3, row);
                row.iter_mut().for_each(|x| *x += v);
                dst.store_row(i1, i2, i3, row);
            }
        }
    });
    Ok(())
}
