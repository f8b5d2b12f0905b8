//! FILL (a constant of the source's shape), TRI (one triangle of each
//! matrix) and DIAG (vectors as diagonal matrices): each task writes whole
//! result rows.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let Some(a) = src_desc(ctx, d, 0) else { return false };
    match d.op {
        Op::Fill { .. } => matches!(a.dtype, DType::F32 | DType::F16) && a.dtype == d.dtype,
        _ => a.dtype == DType::F32 && d.dtype == DType::F32,
    }
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    let op = d.op;
    let expect = match op {
        Op::Diag => [a.ne[0], a.ne[0], a.ne[2], a.ne[3]],
        _ => a.ne,
    };
    if dst.ne != expect || (op == Op::Diag && a.ne[1] != 1) {
        return Err(shape_err(ctx, t, d, format!("source shape {:?}", a.ne)));
    }
    let n0 = dst.ne[0];
    par.for_each(dst.nrows(), n0, n0, |rows, row| {
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            match op {
                Op::Fill { c } => row.fill(c),
                Op::Tri(kind) => {
                    // SAFETY: the same row of the source, in range.
                    unsafe { a.load_row(i1, i2, i3, row) };
                    for (i0, v) in row.iter_mut().enumerate() {
                        if !kind.keeps(i0, i1) {
                            *v = 0.0;
                        }
                    }
                }
                Op::Diag => {
                    row.fill(0.0);
                    // SAFETY: i1 < ne0 of the source (the result is square).
                    row[i1] = unsafe { a.get(i1, 0, i2, i3) };
                }
                _ => {}
            }
            // SAFETY: row r is in range and written by this task alone.
            unsafe { dst.store_row(i1, i2, i3, row) };
        }
    });
    Ok(())
}
