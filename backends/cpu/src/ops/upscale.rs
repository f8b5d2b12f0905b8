//! UPSCALE: resampling to the result's shape, nearest or bilinear, with
//! ggml's f32 index arithmetic (so both pick the same source elements).

use gantry_engine::{Context, DType, Op, Result, ScaleMode, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|a| a.dtype == DType::F32) && d.dtype == DType::F32
}

/// The source index nearest result index `i` at scale `sf` (ggml's `i / sf`,
/// truncated), kept inside the source.
#[inline]
fn nearest(i: usize, sf: f32, len: usize) -> usize {
    ((i as f32 / sf) as usize).min(len - 1)
}

/// The two source indices around result index `i` and the weight of the
/// second (ggml's bilinear sampling with its pixel offset).
#[inline]
fn linear(i: usize, sf: f32, offset: f32, len: usize) -> (usize, usize, f32) {
    let x = (i as f32 + offset) / sf - offset;
    let x0 = x.floor() as i64;
    let hi = len as i64 - 1;
    let (a, b) = (x0.clamp(0, hi), (x0 + 1).clamp(0, hi));
    (a as usize, b as usize, (x - a as f32).clamp(0.0, 1.0))
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let Op::Upscale { mode, align_corners } = d.op else {
        return Err(shape_err(ctx, t, d, "not an UPSCALE"));
    };
    if a.ne.contains(&0) {
        return Err(shape_err(ctx, t, d, format!("source {:?} is empty", a.ne)));
    }
    let mut sf: [f32; 4] = std::array::from_fn(|i| dst.ne[i] as f32 / a.ne[i] as f32);
    let mut offset = 0.5f32;
    if align_corners {
        offset = 0.0;
        for i in 0..2 {
            if dst.ne[i] > 1 && a.ne[i] > 1 {
                sf[i] = (dst.ne[i] - 1) as f32 / (a.ne[i] - 1) as f32;
            }
        }
    }
    let n0 = dst.ne[0];
    par.for_each(dst.nrows(), 4 * n0, n0, |rows, out| {
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            let (j2, j3) = (nearest(i2, sf[2], a.ne[2]), nearest(i3, sf[3], a.ne[3]));
            match mode {
                ScaleMode::Nearest => {
                    let j1 = nearest(i1, sf[1], a.ne[1]);
                    for (i0, o) in out.iter_mut().enumerate() {
                        // SAFETY: every index is clamped inside the source.
                        *o = unsafe { a.get(nearest(i0, sf[0], a.ne[0]), j1, j2, j3) };
                    }
                }
                ScaleMode::Bilinear => {
                    let (y0, y1, dy) = linear(i1, sf[1], offset, a.ne[1]);
                    for (i0, o) in out.iter_mut().enumerate() {
                        let (x0, x1, dx) = linear(i0, sf[0], offset, a.ne[0]);
                        // SAFETY: every index is clamped inside the source.
                        let [p00, p10, p01, p11] = unsafe {
                            [a.get(x0, y0, j2, j3), a.get(x1, y0, j2, j3), a.get(x0, y1, j2, j3), a.get(x1, y1, j2, j3)]
                        };
                        *o = p00 * (1.0 - dx) * (1.0 - dy)
                            + p10 * dx * (1.0 - dy)
                            + p01 * (1.0 - dx) * dy
                            + p11 * dx * dy;
                    }
                }
            }
            // SAFETY: row r is in range and written by this task alone.
            unsafe { dst.store_row(i1, i2, i3, out) };
        }
    });
    Ok(())
}
