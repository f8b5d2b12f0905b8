//! SSM_CONV: Mamba's depthwise causal convolution. Each result row (one
//! token of one sequence, all channels) is written by one task: a dot
//! product of each channel's window with its kernel, summed in f32 in
//! kernel order as ggml does.

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    (0..2).all(|i| src_desc(ctx, d, i).is_some_and(|s| s.dtype == DType::F32)) && d.dtype == DType::F32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let sx = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let c = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    let (d_conv, d_inner) = (c.ne[0], c.ne[1]);
    // Checked again: the reads below index sx by the result's shape and
    // must not trust a node built without the builder.
    let fits = d_conv >= 1
        && sx.ne[0] + 1 == d_conv + dst.ne[1]
        && sx.ne[1] == d_inner
        && dst.ne == [d_inner, dst.ne[1], sx.ne[2], 1]
        && sx.ne[3] == 1;
    if !fits {
        return Err(shape_err(ctx, t, d, format!("window {:?} with kernel {:?}", sx.ne, c.ne)));
    }
    par.for_each(dst.nrows(), d_inner * d_conv, d_inner, |rows, row| {
        for r in rows {
            let [tok, seq, _] = dst.row_index(r);
            for (ch, out) in row.iter_mut().enumerate() {
                let mut sum = 0.0f32;
                for k in 0..d_conv {
                    // SAFETY: tok + k < sx.ne[0], ch < d_inner, seq < sx.ne[2]
                    // (checked above); k < c.ne[0].
                    sum += unsafe { sx.get(tok + k, ch, seq, 0) * c.get(k, ch, 0, 0) };
                }
                *out = sum;
            }
            // SAFETY: row r is in range and written by this task alone.
            unsafe { dst.store_row(tok, seq, 0, row) };
        }
    });
    Ok(())
}
