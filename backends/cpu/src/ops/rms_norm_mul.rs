//! A fused RMS_NORM + MUL (`gantry_engine::sched::FusionKind::RmsNormMul`):
//! each row normalized and scaled by the MUL's other operand in one pass,
//! without writing the norm's result (the optimize system fused it only
//! because the MUL is the norm's sole reader). The arithmetic is the two
//! kernels' own, in their order, so the result is bit-identical to
//! computing them one after the other.
//!
//! The scheduler keeps the norm's source alive until the MUL (an
//! allocation-order edge), so the MUL's result never overlaps it, except
//! as the very same memory when it is computed in place over it: each row
//! is read completely before it is written.

use gantry_engine::tensor::can_repeat;
use gantry_engine::{BinaryOp, Context, DType, Op, Result, TensorId};

use super::binary::apply_broadcast;
use super::bound::Bound;
use super::norm::rms_normalize;
use super::{src, supports_op};
use crate::parallel::Par;

/// Whether `norm` then `mul` can run as one pass: an F32 RMS_NORM whose
/// result is the MUL's first operand, the second repeating over it, all F32.
pub fn fusable(ctx: &Context, norm: TensorId, mul: TensorId) -> bool {
    let (Some(n), Some(m)) = (ctx.get(norm), ctx.get(mul)) else { return false };
    let (Some(x), Some(w)) = (n.srcs[0].and_then(|s| ctx.get(s)), m.srcs[1].and_then(|s| ctx.get(s))) else {
        return false;
    };
    matches!(n.op, Op::RmsNorm { .. })
        && m.op == Op::Binary(BinaryOp::Mul)
        && m.srcs[0] == Some(norm)
        && m.srcs[1] != Some(norm)
        && [n.dtype, m.dtype, x.dtype, w.dtype].iter().all(|&t| t == DType::F32)
        && x.ne == n.ne
        && m.ne == n.ne
        && can_repeat(w.ne, m.ne)
        && n.nelements() > 0
        && supports_op(ctx, norm)
        && supports_op(ctx, mul)
}

/// Computes `mul = rms_norm(x) * w` in one pass. `Ok(false)` (nothing done)
/// when the pair is not [`fusable`]: the caller then computes them one by one.
pub fn compute(ctx: &Context, norm: TensorId, mul: TensorId, par: &Par<'_>) -> Result<bool> {
    if !fusable(ctx, norm, mul) {
        return Ok(false);
    }
    let (nd, md) = (*ctx.desc(norm)?, *ctx.desc(mul)?);
    let Op::RmsNorm { eps } = nd.op else { return Ok(false) };
    let x = Bound::src(ctx, src(ctx, norm, &nd, 0)?)?;
    let w = Bound::src(ctx, src(ctx, mul, &md, 1)?)?;
    let dst = Bound::dst(ctx, mul)?;
    let (n0, nw0) = (x.ne[0], w.ne[0]);
    par.for_each(x.nrows(), 4 * n0, n0 + nw0, |rows, tmp| {
        let (row, scale) = tmp.split_at_mut(n0);
        for r in rows {
            let [i1, i2, i3] = x.row_index(r);
            // SAFETY: indices in range (w's wrap by its own extents); this
            // thread owns row r of dst, and reads finish before it is written.
            unsafe {
                x.load_row(i1, i2, i3, row);
                w.load_row(i1 % w.ne[1], i2 % w.ne[2], i3 % w.ne[3], scale);
            }
            rms_normalize(row, eps);
            apply_broadcast(BinaryOp::Mul, row, scale);
            // SAFETY: as above.
            unsafe { dst.store_row(i1, i2, i3, row) };
        }
    });
    Ok(true)
}
