//! POOL_1D and POOL_2D: the max or mean of each window, one result row
//! per task step. ggml's averages differ: POOL_1D divides by the elements
//! inside the input, POOL_2D by the whole window (padding counts as zero).

use gantry_engine::{Context, DType, Op, PoolOp, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|a| matches!(a.dtype, DType::F32 | DType::F16)) && d.dtype == DType::F32
}

/// The inputs `o·s - p + 0..k` inside `0..len`.
fn window(o: usize, k: u32, s: u32, p: u32, len: usize) -> std::ops::Range<usize> {
    let start = (o * s as usize) as isize - p as isize;
    let end = (start + k as isize).clamp(0, len as isize) as usize;
    (start.max(0) as usize).min(end)..end
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let (op, k, s, p, two_d) = match d.op {
        Op::Pool1d { op, k, s, p } => (op, [k, 1], [s, 1], [p, 0], false),
        Op::Pool2d { op, k, s, p } => (op, k, s, p, true),
        _ => return Err(shape_err(ctx, t, d, "not a pooling")),
    };
    let planes_match = if two_d { dst.ne[2..] == a.ne[2..] } else { dst.ne[1..] == a.ne[1..] };
    if !planes_match {
        return Err(shape_err(ctx, t, d, format!("source shape {:?}", a.ne)));
    }
    let (n0, in0) = (dst.ne[0], a.ne[0]);
    par.for_each(dst.nrows(), n0 * (k[0] * k[1]) as usize, n0 + in0, |rows, tmp| {
        let (out, line) = tmp.split_at_mut(n0);
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            let ys = if two_d { window(i1, k[1], s[1], p[1], a.ne[1]) } else { i1..i1 + 1 };
            let init = match op {
                PoolOp::Max => -f32::MAX,
                PoolOp::Avg => 0.0,
            };
            out.fill(init);
            for y in ys {
                // SAFETY: y < ne1 of the source, i2 and i3 within its planes.
                unsafe { a.load_row(y, i2, i3, line) };
                for (o, res) in out.iter_mut().enumerate() {
                    for &v in &line[window(o, k[0], s[0], p[0], in0)] {
                        *res = match op {
                            PoolOp::Max => res.max(v),
                            PoolOp::Avg => *res + v,
                        };
                    }
                }
            }
            if op == PoolOp::Avg {
                for (o, v) in out.iter_mut().enumerate() {
                    let n = if two_d { (k[0] * k[1]) as usize } else { window(o, k[0], s[0], p[0], in0).len() };
                    *v = if n > 0 { *v / n as f32 } else { 0.0 };
                }
            }
            // SAFETY: row r is in range and written by this task alone.
            unsafe { dst.store_row(i1, i2, i3, out) };
        }
    });
    Ok(())
}
