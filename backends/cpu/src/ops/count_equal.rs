//! COUNT_EQUAL: how many positions of two I32 tensors hold equal values,
//! counted per task over rows and summed.

use std::sync::atomic::{AtomicUsize, Ordering};

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    (0..2).all(|i| src_desc(ctx, d, i).is_some_and(|s| s.dtype == DType::I32)) && d.dtype == DType::I32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let b = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    if a.ne != b.ne || dst.nelements() != 1 {
        return Err(shape_err(ctx, t, d, format!("{:?} against {:?}", a.ne, b.ne)));
    }
    let count = AtomicUsize::new(0);
    par.for_each(a.nrows(), a.ne[0], 0, |rows, _| {
        let mut n = 0;
        for r in rows {
            let [i1, i2, i3] = a.row_index(r);
            for i0 in 0..a.ne[0] {
                // SAFETY: the same in-range element of both; I32 read exactly.
                n += usize::from(unsafe {
                    *(a.at(i0, i1, i2, i3) as *const i32) == *(b.at(i0, i1, i2, i3) as *const i32)
                });
            }
        }
        count.fetch_add(n, Ordering::Relaxed);
    });
    // SAFETY: the result holds one I32 element, written here alone.
    unsafe { *(dst.base as *mut i32) = count.load(Ordering::Relaxed) as i32 };
    Ok(())
}
