//! WIN_PART and WIN_UNPART: SAM's windows cut from and put back into an
//! image. Each result row (one pixel's channels) is copied by one task,
//! through any source strides (ggml's kernels assume a dense source and
//! run on one thread).

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|s| s.dtype == DType::F32) && d.dtype == DType::F32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let ch = a.ne[0];
    match d.op {
        Op::WinPart { npx, npy, w } => {
            let [npx, npy, w] = [npx, npy, w].map(|x| x as usize);
            // Checked again: the copies index the image by the windows' shape.
            let fits = w >= 1
                && npx == a.ne[1].div_ceil(w)
                && npy == a.ne[2].div_ceil(w)
                && a.ne[3] == 1
                && dst.ne == [ch, w, w, npx * npy];
            if !fits {
                return Err(shape_err(ctx, t, d, format!("image {:?} into windows of {w}", a.ne)));
            }
            par.for_each(dst.nrows(), ch, ch, |rows, tmp| {
                for r in rows {
                    let [i1, i2, win] = dst.row_index(r);
                    let (x, y) = ((win % npx) * w + i1, (win / npx) * w + i2);
                    if x < a.ne[1] && y < a.ne[2] {
                        // SAFETY: x, y inside the image (checked here).
                        unsafe { a.load_row(x, y, 0, tmp) };
                    } else {
                        tmp.fill(0.0);
                    }
                    // SAFETY: row r is in range and written by this task alone.
                    unsafe { dst.store_row(i1, i2, win, tmp) };
                }
            });
        }
        Op::WinUnpart { w } => {
            let w = w as usize;
            let npx = dst.ne[1].div_ceil(w.max(1));
            let needed = npx.checked_mul(dst.ne[2].div_ceil(w.max(1)));
            let fits = w >= 1
                && a.ne[1] == w
                && a.ne[2] == w
                && needed.is_some_and(|n| a.ne[3] >= n)
                && dst.ne[0] == ch
                && dst.ne[3] == 1;
            if !fits {
                return Err(shape_err(ctx, t, d, format!("windows {:?} into an image of {:?}", a.ne, dst.ne)));
            }
            par.for_each(dst.nrows(), ch, ch, |rows, tmp| {
                for r in rows {
                    let [x, y, _] = dst.row_index(r);
                    let win = (y / w) * npx + x / w;
                    // SAFETY: x % w, y % w < w = a.ne[1] = a.ne[2]; win <
                    // npx · npy <= a.ne[3] (checked).
                    unsafe { a.load_row(x % w, y % w, win, tmp) };
                    // SAFETY: row r is in range and written by this task alone.
                    unsafe { dst.store_row(x, y, 0, tmp) };
                }
            });
        }
        _ => return Err(shape_err(ctx, t, d, "not a window op")),
    }
    Ok(())
}
