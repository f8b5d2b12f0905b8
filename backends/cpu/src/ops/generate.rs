//! ARANGE (`start + step · i`) and TIMESTEP_EMBEDDING (cosines and sines of
//! timesteps at geometric frequencies), with ggml's f32 arithmetic.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    d.dtype == DType::F32
        && match d.op {
            Op::TimestepEmbedding { .. } => src_desc(ctx, d, 0).is_some_and(|a| a.dtype == DType::F32),
            _ => true,
        }
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let dst = Bound::dst(ctx, t)?;
    let n0 = dst.ne[0];
    match d.op {
        Op::Arange { start, step, .. } => {
            par.for_each(dst.nrows(), n0, n0, |rows, out| {
                for r in rows {
                    let [i1, i2, i3] = dst.row_index(r);
                    for (i, o) in out.iter_mut().enumerate() {
                        *o = start + step * i as f32;
                    }
                    // SAFETY: row r is in range and written by this task alone.
                    unsafe { dst.store_row(i1, i2, i3, out) };
                }
            });
        }
        Op::TimestepEmbedding { dim, max_period } => {
            let ts = Bound::src(ctx, src(ctx, t, d, 0)?)?;
            if dst.ne != [dim as usize, ts.ne[0], 1, 1] {
                return Err(shape_err(ctx, t, d, format!("timesteps {:?}", ts.ne)));
            }
            let half = dim as usize / 2;
            let log_period = (max_period as f32).ln();
            par.for_each(dst.nrows(), 4 * n0, n0, |rows, out| {
                for r in rows {
                    // SAFETY: r < the number of timesteps (the result's rows).
                    let step = unsafe { ts.get(r, 0, 0, 0) };
                    for j in 0..half {
                        let arg = step * (-log_period * j as f32 / half as f32).exp();
                        out[j] = arg.cos();
                        out[j + half] = arg.sin();
                    }
                    if n0 % 2 == 1 {
                        out[n0 - 1] = 0.0;
                    }
                    // SAFETY: row r is in range and written by this task alone.
                    unsafe { dst.store_row(r, 0, 0, out) };
                }
            });
        }
        _ => return Err(shape_err(ctx, t, d, "not ARANGE or TIMESTEP_EMBEDDING")),
    }
    Ok(())
}
