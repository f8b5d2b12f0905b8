//! Row normalizations: NORM (`(x - mean) / sqrt(var + eps)`), RMS_NORM
//! (`x / sqrt(mean(x^2) + eps)`) and L2_NORM (`x / max(|x|, eps)`), with the
//! sums in f64 as ggml does.

use gantry_engine::{Context, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{is_float, shape_err, src, src_desc};
use crate::parallel::Par;
use crate::simd;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|s| is_float(s.dtype) && s.dtype == d.dtype)
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let s = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    if s.ne != dst.ne {
        return Err(shape_err(ctx, t, d, format!("source shape {:?} differs from the result's", s.ne)));
    }
    let op = d.op;
    let n0 = s.ne[0];
    par.for_each(s.nrows(), 3 * n0, n0, |rows, x| {
        for r in rows {
            let [i1, i2, i3] = s.row_index(r);
            // SAFETY: indices in range; this thread owns row r of dst, read
            // completely before it is written.
            unsafe { s.load_row(i1, i2, i3, x) };
            match op {
                Op::Norm { eps } => {
                    let mean = (simd::sum_f64(x) / n0 as f64) as f32;
                    let var = (simd::sum_sq_f64(x, mean) / n0 as f64) as f32;
                    let inv = 1.0 / (var + eps).sqrt();
                    x.iter_mut().for_each(|v| *v = (*v - mean) * inv);
                }
                Op::RmsNorm { eps } => rms_normalize(x, eps),
                Op::L2Norm { eps } => {
                    let norm = (simd::sum_sq_f64(x, 0.0).sqrt() as f32).max(eps);
                    simd::scale(x, 1.0 / norm);
                }
                _ => {}
            }
            // SAFETY: as above.
            unsafe { dst.store_row(i1, i2, i3, x) };
        }
    });
    Ok(())
}

/// `x / sqrt(mean(x²) + eps)` in place: RMS_NORM of one row (also what the
/// fused RMS_NORM+MUL computes, so the two agree bit for bit).
pub(super) fn rms_normalize(x: &mut [f32], eps: f32) {
    let mean_sq = (simd::sum_sq_f64(x, 0.0) / x.len() as f64) as f32;
    simd::scale(x, 1.0 / (mean_sq + eps).sqrt());
}
