//! GET_REL_POS and ADD_REL_POS: SAM's decomposed relative positions. Each
//! result row is written by one task (ggml's GET_REL_POS runs on one
//! thread, its ADD_REL_POS splits by batch).

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    match d.op {
        Op::GetRelPos => src_desc(ctx, d, 0).is_some_and(|s| s.dtype == DType::F16) && d.dtype == DType::F16,
        Op::AddRelPos => {
            (0..3).all(|i| src_desc(ctx, d, i).is_some_and(|s| s.dtype == DType::F32)) && d.dtype == DType::F32
        }
        _ => false,
    }
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    match d.op {
        Op::GetRelPos => get_rel_pos(ctx, t, d, par),
        Op::AddRelPos => add_rel_pos(ctx, t, d, par),
        _ => Err(shape_err(ctx, t, d, "not a relative-position op")),
    }
}

/// `out[c, k, q] = a[c, kh - 1 - k + q]`: row `(k, q)` is a copy of row
/// `kh - 1 - k + q` of the table (F16 through f32, which is exact).
fn get_rel_pos(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let kh = dst.ne[1];
    // Checked again: the copies index the table by the result's shape.
    let fits = kh >= 1 && dst.ne == [a.ne[0], kh, kh, 1] && kh.checked_mul(2).map(|n| n - 1) == Some(a.ne[1]);
    if !fits {
        return Err(shape_err(ctx, t, d, format!("table {:?}", a.ne)));
    }
    par.for_each(dst.nrows(), a.ne[0], a.ne[0], |rows, tmp| {
        for r in rows {
            let [k, q, _] = dst.row_index(r);
            // SAFETY: kh - 1 - k + q <= 2 · kh - 2 < a.ne[1]; row r is in
            // range and written by this task alone.
            unsafe {
                a.load_row(kh - 1 - k + q, 0, 0, tmp);
                dst.store_row(k, q, 0, tmp);
            }
        }
    });
    Ok(())
}

/// `out[y · n + x, q, b] = a + ph[y, q, b] + pw[x, q, b]`, the two terms
/// added in ggml's order (the one of the lower index first).
fn add_rel_pos(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let pw = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let ph = Bound::src(ctx, src(ctx, t, d, 2)?)?;
    let dst = Bound::dst(ctx, t)?;
    let [n, q1, q2, b] = pw.ne;
    // Checked again: the terms are indexed by the scores' shape.
    let fits = ph.ne == pw.ne
        && n.checked_mul(n) == Some(a.ne[0])
        && q1.checked_mul(q2) == Some(a.ne[1])
        && a.ne[2] == b
        && a.ne[3] == 1
        && dst.ne == a.ne;
    if !fits {
        return Err(shape_err(ctx, t, d, format!("scores {:?} with terms {:?}", a.ne, pw.ne)));
    }
    par.for_each(dst.nrows(), a.ne[0], a.ne[0], |rows, tmp| {
        for r in rows {
            let [q, bi, _] = dst.row_index(r);
            let (j1, j2) = (q % q1, q / q1);
            // SAFETY: row r is in range (q < a.ne[1], bi < a.ne[2]).
            unsafe { a.load_row(q, bi, 0, tmp) };
            for (col, v) in tmp.iter_mut().enumerate() {
                let (y, x) = (col / n, col % n);
                // SAFETY: x, y < n; j1 < q1, j2 < q2 (q < q1 · q2); bi < b.
                let (h_term, w_term) = unsafe { (ph.get(y, j1, j2, bi), pw.get(x, j1, j2, bi)) };
                *v = if y <= x { *v + h_term + w_term } else { *v + w_term + h_term };
            }
            // SAFETY: row r is in range and written by this task alone.
            unsafe { dst.store_row(q, bi, 0, tmp) };
        }
    });
    Ok(())
}
