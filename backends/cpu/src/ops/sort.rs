//! ARGSORT and TOP_K: the indices that order each row, or those of its `k`
//! largest elements (largest first). Ties keep index order, so the results
//! are deterministic (ggml's CPU sort leaves ties unspecified); NaNs sort
//! by `f32::total_cmp`, after every number in ascending order.

use std::cmp::Ordering;

use gantry_engine::{Context, DType, Op, Result, SortOrder, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let Some(a) = src_desc(ctx, d, 0) else { return false };
    a.dtype == DType::F32 && d.dtype == DType::I32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let n0 = a.ne[0];
    let (order, k) = match d.op {
        Op::Argsort { order } => (order, n0),
        _ => (SortOrder::Desc, dst.ne[0]),
    };
    if a.ne[1..] != dst.ne[1..] || k > n0 || n0 > i32::MAX as usize {
        return Err(shape_err(ctx, t, d, format!("rows of {:?} do not give {:?}", a.ne, dst.ne)));
    }
    // A row's values, then its indices (u32 bits in the f32 scratch).
    par.for_each(a.nrows(), 16 * n0, 2 * n0, |rows, tmp| {
        let (values, idx) = tmp.split_at_mut(n0);
        let idx: &mut [u32] = bytemuck::cast_slice_mut(idx);
        for r in rows {
            let [i1, i2, i3] = a.row_index(r);
            // SAFETY: the indices are within a's shape; a is only read.
            unsafe { a.load_row(i1, i2, i3, values) };
            idx.iter_mut().enumerate().for_each(|(i, v)| *v = i as u32);
            let values = &*values;
            let cmp = |x: &u32, y: &u32| -> Ordering {
                let (vx, vy) = (values[*x as usize], values[*y as usize]);
                let by_value = match order {
                    SortOrder::Asc => vx.total_cmp(&vy),
                    SortOrder::Desc => vy.total_cmp(&vx),
                };
                by_value.then(x.cmp(y))
            };
            if k < n0 && k > 0 {
                idx.select_nth_unstable_by(k - 1, cmp);
            }
            idx[..k].sort_unstable_by(cmp);
            for (i0, &v) in idx[..k].iter().enumerate() {
                // SAFETY: i0 < k = dst.ne[0] and the row is within dst's
                // shape; I32 elements are aligned; this task alone writes
                // row r of dst.
                unsafe { *(dst.at(i0, i1, i2, i3) as *mut i32) = v as i32 };
            }
        }
    });
    Ok(())
}
