//! Tensors in a `CPU_REPACK` buffer ([`crate::RepackBuffer`]): which
//! ops may read them, and their repacked bytes for the kernels that can.
//!
//! Only MUL_MAT (a repacked matrix as its weights, F32 columns), MUL_MAT_ID
//! (a repacked matrix or stack of them as its experts' weights) and GET_ROWS
//! (a repacked matrix as its rows) read a repacked tensor, and only the tensor itself,
//! never a view of it (a view's offsets are the plain layout's); an op that
//! would read one otherwise, or write one, is not supported, so the
//! scheduler reports it rather than a kernel reading the wrong layout.

use gantry_engine::{Context, DType, Error, Op, Result, TensorDesc, TensorId};

use crate::RepackBuffer;
use crate::quant::repack::RepackedMatrix;
use crate::repack_buffer::RepackedStack;

/// The `CPU_REPACK` buffer holding `t`'s memory (its root's, for a view)
/// and `t`'s offset in it.
fn repack_buffer(ctx: &Context, t: TensorId) -> Option<(&RepackBuffer, usize)> {
    let (entry, p) = ctx.tensor_buffer(t).ok()?;
    entry.buffer.as_any().downcast_ref::<RepackBuffer>().map(|b| (b, p.offset))
}

/// Whether `t`'s memory is in a `CPU_REPACK` buffer.
pub fn is_repacked(ctx: &Context, t: TensorId) -> bool {
    repack_buffer(ctx, t).is_some()
}

/// Whether the CPU computes node `d` given its sources' and its own
/// memory: `None` when nothing of it is repacked (the op's own rules
/// decide), else whether it is one of the reads of repacked weights the
/// kernels take.
pub fn supports(ctx: &Context, t: TensorId, d: &TensorDesc) -> Option<bool> {
    let repacked = |s: Option<TensorId>| s.is_some_and(|s| is_repacked(ctx, s));
    if !repacked(Some(t)) && !d.srcs.iter().any(|&s| repacked(s)) {
        return None;
    }
    if repacked(Some(t)) {
        // Views of weights compute nothing; nothing computes into weights here.
        return Some(d.op.is_empty());
    }
    let whole = |s: Option<TensorId>| s.and_then(|s| ctx.get(s)).is_some_and(|a| a.view_src.is_none());
    // MUL_MAT and GET_ROWS read one matrix; a stack is an expert layer's.
    let one_matrix = d.srcs[0].and_then(|s| ctx.get(s)).is_some_and(|a| a.ne[2] <= 1);
    let others_plain = d.srcs.iter().skip(1).all(|&s| !repacked(s));
    let src1_dtype = d.srcs[1].and_then(|s| ctx.get(s)).map(|b| b.dtype);
    Some(match d.op {
        Op::MulMat => {
            repacked(d.srcs[0])
                && whole(d.srcs[0])
                && one_matrix
                && others_plain
                && src1_dtype == Some(DType::F32)
                && d.dtype == DType::F32
        }
        // Expert weights: a stack of repacked matrices, one per expert.
        Op::MulMatId => {
            repacked(d.srcs[0])
                && whole(d.srcs[0])
                && others_plain
                && src1_dtype == Some(DType::F32)
                && d.srcs[2].and_then(|s| ctx.get(s)).map(|i| i.dtype) == Some(DType::I32)
                && d.dtype == DType::F32
        }
        Op::GetRows => {
            repacked(d.srcs[0])
                && whole(d.srcs[0])
                && one_matrix
                && others_plain
                && src1_dtype == Some(DType::I32)
                && d.dtype == DType::F32
        }
        _ => false,
    })
}

/// The `CPU_REPACK` buffer holding `t` and `t`'s offset in it; an error
/// when `t` is a view of repacked weights (only the whole tensor has the
/// repacked layout's meaning).
fn whole_repacked(ctx: &Context, t: TensorId) -> Result<Option<(&RepackBuffer, usize)>> {
    let Some(found) = repack_buffer(ctx, t) else { return Ok(None) };
    if ctx.desc(t)?.view_src.is_some() {
        return Err(Error::Unsupported(format!(
            "{} is a view of repacked weights, which only the whole tensor can be read as",
            ctx.describe(t)
        )));
    }
    Ok(Some(found))
}

/// The repacked matrix of `t` when its memory is in a `CPU_REPACK` buffer;
/// an error when `t` is a view of one, or a stack of several matrices.
pub fn matrix(ctx: &Context, t: TensorId) -> Result<Option<RepackedMatrix<'_>>> {
    let Some((buffer, offset)) = whole_repacked(ctx, t)? else { return Ok(None) };
    buffer
        .matrix(t, offset)
        .map(Some)
        .map_err(|e| Error::InvalidTensor { tensor: ctx.describe(t), reason: e.to_string() })
}

/// The repacked matrices of `t` (one, or an expert layer's stack) when its
/// memory is in a `CPU_REPACK` buffer; an error when `t` is a view of one.
pub fn stack(ctx: &Context, t: TensorId) -> Result<Option<RepackedStack<'_>>> {
    let Some((buffer, offset)) = whole_repacked(ctx, t)? else { return Ok(None) };
    buffer
        .stack(t, offset)
        .map(Some)
        .map_err(|e| Error::InvalidTensor { tensor: ctx.describe(t), reason: e.to_string() })
}
