//! PAD (zeros, or the source wrapped around, before and after each dim),
//! PAD_REFLECT_1D (rows mirrored at their ends) and ROLL (elements moved
//! along each dim, wrapping around): each task writes whole result rows.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|a| a.dtype == DType::F32) && d.dtype == DType::F32
}

/// `i - shift` wrapped into `0..len` (`len` > 0).
#[inline]
fn wrap(i: usize, shift: i64, len: usize) -> usize {
    (i as i64 - shift).rem_euclid(len as i64) as usize
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let (n0, m0) = (dst.ne[0], a.ne[0]);
    let op = d.op;
    let expect = match op {
        Op::Pad { lp, rp, .. } => std::array::from_fn(|i| a.ne[i] + (lp[i] + rp[i]) as usize),
        Op::PadReflect1d { p0, p1 } => [m0 + (p0 + p1) as usize, a.ne[1], a.ne[2], a.ne[3]],
        _ => a.ne,
    };
    let wraps = matches!(op, Op::Roll { .. } | Op::Pad { circular: true, .. });
    // A reflection reaches back at most one row length less one.
    let reflects_too_far = matches!(op, Op::PadReflect1d { p0, p1 } if p0 as usize >= m0 || p1 as usize >= m0);
    if dst.ne != expect || (wraps && a.ne.contains(&0)) || reflects_too_far {
        return Err(shape_err(ctx, t, d, format!("source shape {:?}", a.ne)));
    }
    par.for_each(dst.nrows(), n0, n0 + m0, |rows, tmp| {
        let (out, line) = tmp.split_at_mut(n0);
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            match op {
                Op::Pad { lp, circular: false, .. } => {
                    let at = |i: usize, k: usize| i.checked_sub(lp[k] as usize).filter(|&j| j < a.ne[k]);
                    out.fill(0.0);
                    if let (Some(j1), Some(j2), Some(j3)) = (at(i1, 1), at(i2, 2), at(i3, 3)) {
                        // SAFETY: j1, j2, j3 inside the source.
                        unsafe { a.load_row(j1, j2, j3, line) };
                        let l0 = lp[0] as usize;
                        out[l0..l0 + m0].copy_from_slice(&line[..m0]);
                    }
                }
                Op::Pad { .. } | Op::Roll { .. } => {
                    let shift: [i64; 4] = match op {
                        Op::Roll { shift } => shift.map(i64::from),
                        Op::Pad { lp, .. } => lp.map(i64::from),
                        _ => [0; 4],
                    };
                    let (j1, j2, j3) =
                        (wrap(i1, shift[1], a.ne[1]), wrap(i2, shift[2], a.ne[2]), wrap(i3, shift[3], a.ne[3]));
                    // SAFETY: indices wrapped inside the (non-empty) source.
                    unsafe { a.load_row(j1, j2, j3, line) };
                    for (i0, o) in out.iter_mut().enumerate() {
                        *o = line[wrap(i0, shift[0], m0)];
                    }
                }
                Op::PadReflect1d { p0, .. } => {
                    // SAFETY: same rows as the result.
                    unsafe { a.load_row(i1, i2, i3, line) };
                    let p0 = p0 as usize;
                    for (i0, o) in out.iter_mut().enumerate() {
                        // Mirror at both ends, the edge element not repeated.
                        let j = if i0 < p0 {
                            p0 - i0
                        } else if i0 - p0 < m0 {
                            i0 - p0
                        } else {
                            2 * (m0 - 1) - (i0 - p0)
                        };
                        *o = line[j];
                    }
                }
                _ => {}
            }
            // SAFETY: row r is in range and written by this task alone.
            unsafe { dst.store_row(i1, i2, i3, out) };
        }
    });
    Ok(())
}
