//! The direct convolutions CONV_2D (every input channel into every output
//! channel) and CONV_2D_DW (each channel its own kernel): each task
//! computes whole result rows, accumulating one kernel tap at a time over
//! a loaded input row.

use gantry_engine::{Context, ConvParams, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::im2col::tap;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|k| matches!(k.dtype, DType::F32 | DType::F16))
        && src_desc(ctx, d, 1).is_some_and(|x| x.dtype == DType::F32)
        && d.dtype == DType::F32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, conv: ConvParams, par: &Par<'_>) -> Result<()> {
    let kernel = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let image = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    let depthwise = matches!(d.op, Op::Conv2dDw(_));
    let [kw, kh, kc, _] = kernel.ne;
    let [iw, ih, ic, _] = image.ne;
    let ow = dst.ne[0];
    let ok = if depthwise {
        kc == 1 && kernel.ne[3] == ic && dst.ne[2] == ic
    } else {
        kc == ic && dst.ne[2] == kernel.ne[3]
    };
    if !ok || dst.ne[3] != image.ne[3] {
        return Err(shape_err(ctx, t, d, format!("kernel {:?} and image {:?}", kernel.ne, image.ne)));
    }
    // Per result row: the sums, then one input row.
    let work = ow * kw * kh * if depthwise { 1 } else { ic };
    par.for_each(dst.nrows(), work, ow + iw, |rows, tmp| {
        let (acc, line) = tmp.split_at_mut(ow);
        for r in rows {
            let [y, oc, n] = dst.row_index(r);
            acc.fill(0.0);
            let channels = if depthwise { oc..oc + 1 } else { 0..ic };
            for c in channels {
                let kc = if depthwise { 0 } else { c };
                for ky in 0..kh {
                    let Some(sy) = tap(y, ky, &conv, 1, ih) else { continue };
                    // SAFETY: sy < IH, c < IC, n below the batch (checked above).
                    unsafe { image.load_row(sy, c, n, line) };
                    for kx in 0..kw {
                        // SAFETY: kx < KW, ky < KH, kc and oc within the kernel.
                        let w = unsafe { kernel.get(kx, ky, kc, oc) };
                        for (x, a) in acc.iter_mut().enumerate() {
                            if let Some(sx) = tap(x, kx, &conv, 0, iw) {
                                *a += w * line[sx];
                            }
                        }
                    }
                }
            }
            // SAFETY: row r is in range and written by this task alone.
            unsafe { dst.store_row(y, oc, n, acc) };
        }
    });
    Ok(())
}
