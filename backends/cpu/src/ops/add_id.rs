//! ADD_ID: `a[:, e, t] + b[:, ids[e, t]]`, each chosen expert's bias row
//! added to its slot (gpt-oss's expert biases). Every id is checked against
//! `b`'s rows before any row is read with it.

use gantry_engine::{Context, DType, Error, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(a), Some(b), Some(ids)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1), src_desc(ctx, d, 2)) else {
        return false;
    };
    a.dtype == DType::F32 && b.dtype == DType::F32 && ids.dtype == DType::I32 && d.dtype == DType::F32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let b = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let ids = Bound::src(ctx, src(ctx, t, d, 2)?)?;
    let dst = Bound::dst(ctx, t)?;
    let [n, n_used, n_tokens, _] = dst.ne;
    let ok = a.ne == dst.ne
        && dst.ne[3] == 1
        && b.ne[0] == n
        && b.ne[2] == 1
        && b.ne[3] == 1
        && ids.ne == [n_used, n_tokens, 1, 1];
    if !ok {
        return Err(shape_err(
            ctx,
            t,
            d,
            format!("{:?} + {:?} by ids {:?} does not give {:?}", a.ne, b.ne, ids.ne, dst.ne),
        ));
    }
    let n_expert = b.ne[1];
    let id_at = |e: usize, tok: usize| -> i32 {
        // SAFETY: e < n_used and tok < n_tokens index the ids (shape checked
        // above); I32 elements are aligned (checked at binding).
        unsafe { *(ids.at(e, tok, 0, 0) as *const i32) }
    };
    for tok in 0..n_tokens {
        for e in 0..n_used {
            let id = id_at(e, tok);
            if usize::try_from(id).map_or(true, |x| x >= n_expert) {
                return Err(Error::InvalidOp {
                    op: "ADD_ID",
                    reason: format!(
                        "{}: the ids {} hold row {id} at [{e}, {tok}], outside the {n_expert} rows of {}",
                        ctx.describe(t),
                        d.srcs[2].map(|s| ctx.describe(s)).unwrap_or_default(),
                        d.srcs[1].map(|s| ctx.describe(s)).unwrap_or_default(),
                    ),
                });
            }
        }
    }
    par.for_each(n_used * n_tokens, 2 * n, 2 * n, |rows, tmp| {
        let (x, bias) = tmp.split_at_mut(n);
        for r in rows {
            let (e, tok) = (r % n_used, r / n_used);
            // Checked above: 0 <= id < n_expert.
            let id = id_at(e, tok) as usize;
            // SAFETY: every index is within its tensor's shape; this task
            // alone writes row (e, tok) of dst, after reading row (e, tok)
            // of a (which it may be, in place).
            unsafe {
                a.load_row(e, tok, 0, x);
                b.load_row(id, 0, 0, bias);
                x.iter_mut().zip(bias.iter()).for_each(|(v, b)| *v += b);
                dst.store_row(e, tok, 0, x);
            }
        }
    });
    Ok(())
}
