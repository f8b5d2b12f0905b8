//! IM2COL: each patch of an image under a kernel, as one row of the
//! result (zeros where the patch reaches into the padding), 1-D or 2-D,
//! into F32 or F16.

use gantry_engine::{Context, ConvParams, DType, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 1).is_some_and(|b| matches!(b.dtype, DType::F32 | DType::F16))
        && src_desc(ctx, d, 0).is_some()
        && matches!(d.dtype, DType::F32 | DType::F16)
}

/// Where source index `o·stride + k·dilation - pad` lands, if inside `0..len`.
#[inline]
pub(super) fn tap(o: usize, k: usize, conv: &ConvParams, dim: usize, len: usize) -> Option<usize> {
    let at = (o * conv.stride[dim] as usize + k * conv.dilation[dim] as usize).checked_sub(conv.pad[dim] as usize)?;
    (at < len).then_some(at)
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, conv: ConvParams, is_2d: bool, par: &Par<'_>) -> Result<()> {
    let kernel = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let image = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    // [KW, KH] of the kernel, [IW, IH, IC] of the image.
    let (kw, kh) = (kernel.ne[0], if is_2d { kernel.ne[1] } else { 1 });
    let (iw, ih, ic) = if is_2d { (image.ne[0], image.ne[1], image.ne[2]) } else { (image.ne[0], 1, image.ne[1]) };
    if dst.ne[0] != ic * kh * kw {
        return Err(shape_err(ctx, t, d, format!("rows of {} for {ic} channels of {kh}×{kw}", dst.ne[0])));
    }
    let n0 = dst.ne[0];
    par.for_each(dst.nrows(), 2 * n0, n0, |rows, row| {
        for r in rows {
            let [ow, i2, i3] = dst.row_index(r);
            // 2-D rows are [OW, OH, N]; 1-D rows [OW, N].
            let (oh, n) = if is_2d { (i2, i3) } else { (0, i2) };
            for c in 0..ic {
                for ky in 0..kh {
                    let y = if is_2d { tap(oh, ky, &conv, 1, ih) } else { Some(0) };
                    for kx in 0..kw {
                        let v = match (tap(ow, kx, &conv, 0, iw), y) {
                            // SAFETY: x < IW, y < IH, c < IC and n below the
                            // image's batch, which the result's rows count.
                            (Some(x), Some(y)) => unsafe {
                                if is_2d { image.get(x, y, c, n) } else { image.get(x, c, n, 0) }
                            },
                            _ => 0.0,
                        };
                        row[(c * kh + ky) * kw + kx] = v;
                    }
                }
            }
            // SAFETY: row r is in range and written by this task alone.
            unsafe { dst.store_row(ow, i2, i3, row) };
        }
    });
    Ok(())
}
