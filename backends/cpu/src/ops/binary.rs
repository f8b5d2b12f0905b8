//! ADD, SUB, MUL, DIV with `src1` repeated over `src0` (ggml's broadcast by
//! repetition: index `i` of `src1` along each dim is `i % ne1`).

use gantry_engine::{BinaryOp, Context, DType, Result, TensorDesc, TensorId, tensor::can_repeat};

use super::bound::Bound;
use super::{is_float, shape_err, src, src_desc};
use crate::parallel::Par;
use crate::simd;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(a), Some(b)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1)) else { return false };
    is_float(a.dtype) && a.dtype == d.dtype && (b.dtype == DType::F32 || b.dtype == a.dtype)
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, op: BinaryOp, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let b = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    if a.ne != dst.ne || !can_repeat(b.ne, dst.ne) {
        return Err(shape_err(ctx, t, d, format!("{:?} (op) {:?} does not broadcast to {:?}", a.ne, b.ne, dst.ne)));
    }
    let (n0, nb0) = (dst.ne[0], b.ne[0]);
    par.for_each(dst.nrows(), n0, n0 + nb0, |rows, tmp| {
        let (x, y) = tmp.split_at_mut(n0);
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            // SAFETY: indices in range (b's wrap by its own extents); this thread
            // owns row r of dst, and reads finish before the row is written.
            unsafe {
                a.load_row(i1, i2, i3, x);
                b.load_row(i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3], y);
            }
            apply_broadcast(op, x, y);
            // SAFETY: as above.
            unsafe { dst.store_row(i1, i2, i3, x) };
        }
    });
    Ok(())
}

/// `x[i] = x[i] (op) y[i % y.len()]`.
pub(super) fn apply_broadcast(op: BinaryOp, x: &mut [f32], y: &[f32]) {
    if y.len() == 1 {
        let v = y[0];
        x.iter_mut().for_each(|e| *e = op.apply(*e, v));
        return;
    }
    for chunk in x.chunks_mut(y.len()) {
        apply_same(op, chunk, y);
    }
}

simd::multiversion! {
    fn apply_same(op: BinaryOp, x: &mut [f32], y: &[f32]) {
        match op {
            BinaryOp::Add => x.iter_mut().zip(y).for_each(|(a, b)| *a += b),
            BinaryOp::Sub => x.iter_mut().zip(y).for_each(|(a, b)| *a -= b),
            BinaryOp::Mul => x.iter_mut().zip(y).for_each(|(a, b)| *a *= b),
            BinaryOp::Div => x.iter_mut().zip(y).for_each(|(a, b)| *a /= b),
        }
    }
}
