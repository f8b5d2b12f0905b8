//! SET and ACC: a copy of `src0`, then `src1` written over (SET) or added
//! to (ACC) a byte-addressed view of the copy. The builder checked that
//! the view lies inside the result in whole, distinct elements, so the
//! second pass splits `src1`'s rows over the threads without two of them
//! touching one element.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId, TensorLayout};

use super::bound::{Bound, read_elem, write_elem};
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let dtypes: &[DType] = if matches!(d.op, Op::Acc { .. }) { &[DType::F32] } else { &[DType::F32, DType::I32] };
    src_desc(ctx, d, 0).is_some_and(|a| dtypes.contains(&a.dtype) && a.dtype == d.dtype)
        && src_desc(ctx, d, 1).is_some_and(|b| b.dtype == d.dtype)
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let b = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    let (Op::Set { nb, offset } | Op::Acc { nb, offset }) = d.op else {
        return Err(shape_err(ctx, t, d, "not SET or ACC"));
    };
    let add = matches!(d.op, Op::Acc { .. });
    let es = dst.elem_size();
    let view_nb = [es, nb[0], nb[1], nb[2]];
    // The last byte the view reaches, checked again here: the kernel must not
    // trust a description built without the builder.
    let last = (0..4).try_fold(offset, |acc, i| acc.checked_add(b.ne[i].saturating_sub(1).checked_mul(view_nb[i])?));
    let total = dst.nelements() * es;
    let view = TensorLayout { dtype: dst.dtype, ne: b.ne, nb: view_nb };
    if a.ne != dst.ne
        || !dst.is_contiguous()
        || last.is_none_or(|l| l + es > total)
        || !offset.is_multiple_of(es)
        || view_nb.iter().any(|s| !s.is_multiple_of(es))
        || view.overlaps_itself()
    {
        return Err(shape_err(ctx, t, d, format!("{:?} at byte {offset} with strides {nb:?}", b.ne)));
    }
    let n0 = dst.ne[0];
    par.for_each(dst.nrows(), n0, n0, |rows, row| {
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            // SAFETY: the same row of both, in range; this task alone writes it.
            unsafe {
                a.load_row(i1, i2, i3, row);
                dst.store_row(i1, i2, i3, row);
            }
        }
    });
    let base = crate::parallel::SendPtr(dst.base);
    par.for_each(b.nrows(), b.ne[0], 0, |rows, _| {
        for r in rows {
            let [i1, i2, i3] = b.row_index(r);
            for i0 in 0..b.ne[0] {
                let at = offset + i0 * es + i1 * view_nb[1] + i2 * view_nb[2] + i3 * view_nb[3];
                // SAFETY: `at` lies inside the contiguous result (checked
                // above) at a whole element; the view's elements are
                // distinct, so no other task touches this one; the element
                // of b is in range.
                unsafe {
                    let p = base.get().add(at);
                    let v = b.get(i0, i1, i2, i3);
                    write_elem(dst.dtype, p, if add { read_elem(dst.dtype, p) + v } else { v });
                }
            }
        }
    });
    Ok(())
}
