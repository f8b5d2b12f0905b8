//! GROUP_NORM: `(x - mean) / sqrt(var + eps)` over each group of channels
//! (dim 2) of each sample (dim 3), sums in f64 as ggml does. One task per
//! (group, sample): the groups' elements are disjoint.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|a| a.dtype == DType::F32) && d.dtype == DType::F32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let Op::GroupNorm { n_groups, eps } = d.op else { return Err(shape_err(ctx, t, d, "not a GROUP_NORM")) };
    if a.ne != dst.ne || n_groups == 0 {
        return Err(shape_err(ctx, t, d, format!("source shape {:?}", a.ne)));
    }
    let [n0, n1, channels, samples] = a.ne;
    let per_group = channels.div_ceil(n_groups as usize);
    par.for_each(n_groups as usize * samples, 3 * n0 * n1 * per_group, n0, |items, row| {
        for item in items {
            let (g, n) = (item % n_groups as usize, item / n_groups as usize);
            let cs = (g * per_group).min(channels)..((g + 1) * per_group).min(channels);
            if cs.is_empty() {
                continue;
            }
            let count = (n0 * n1 * cs.len()) as f64;
            let (mut sum, mut sum2) = (0f64, 0f64);
            for c in cs.clone() {
                for y in 0..n1 {
                    // SAFETY: y, c, n inside the source.
                    unsafe { a.load_row(y, c, n, row) };
                    sum += row.iter().map(|&v| f64::from(v)).sum::<f64>();
                }
            }
            let mean = (sum / count) as f32;
            for c in cs.clone() {
                for y in 0..n1 {
                    // SAFETY: as above.
                    unsafe { a.load_row(y, c, n, row) };
                    sum2 += row.iter().map(|&v| f64::from((v - mean) * (v - mean))).sum::<f64>();
                }
            }
            let scale = 1.0 / ((sum2 / count) as f32 + eps).sqrt();
            for c in cs {
                for y in 0..n1 {
                    // SAFETY: as above; this task alone writes the group's
                    // rows of sample n, each read before it is written.
                    unsafe {
                        a.load_row(y, c, n, row);
                        row.iter_mut().for_each(|v| *v = (*v - mean) * scale);
                        dst.store_row(y, c, n, row);
                    }
                }
            }
        }
    });
    Ok(())
}
