//! The CPU kernels, one file per op family, and the dispatch from an op to
//! its kernel. Each family module has `supports` (what its kernels take:
//! the single source of truth for [`crate::supports_op`]) and `compute`.

mod add1;
mod add_id;
mod binary;
pub(crate) mod bound;
mod concat_repeat;
mod conv;
mod conv_transpose;
mod copy;
mod count_equal;
mod cumsum;
mod delta_net;
mod fill_tri;
mod flash_attn;
mod generate;
mod glu;
mod group_norm;
mod im2col;
mod linear_attn;
mod mul_mat;
mod mul_mat_id;
mod mul_mat_quant;
pub(crate) mod mul_mat_shared;
mod norm;
mod pad;
mod pool;
mod reduce;
mod rel_pos;
pub(crate) mod repacked;
pub(crate) mod rms_norm_mul;
pub(crate) mod rope;
pub(crate) mod rope_angles;
pub(crate) mod rope_set_rows;
mod rows;
mod set_acc;
mod softmax;
mod solve_tri;
mod sort;
mod ssm_conv;
mod ssm_scan;
mod unary;
mod upscale;
mod window;

use gantry_engine::{Context, DType, Error, Op, Result, TensorDesc, TensorId};

use super::compute_state::KernelMemory;
use super::parallel::Par;

/// Whether the CPU kernels can compute `tensor` (its op, dtypes and layouts).
pub fn supports_op(ctx: &Context, tensor: TensorId) -> bool {
    let Some(d) = ctx.get(tensor) else { return false };
    // Repacked weights: only the reads that know their layout.
    if let Some(ok) = repacked::supports(ctx, tensor, d) {
        return ok;
    }
    match d.op {
        Op::None | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => true,
        Op::Cpy | Op::Cont | Op::Dup => copy::supports(ctx, d),
        Op::GetRows | Op::SetRows => rows::supports(ctx, d),
        Op::Binary(_) => binary::supports(ctx, d),
        Op::Scale { .. } | Op::Clamp { .. } | Op::LeakyRelu { .. } | Op::Unary(_) => unary::supports(ctx, d),
        Op::Glu { .. } => glu::supports(ctx, d),
        Op::Sum | Op::SumRows | Op::Mean | Op::Argmax => reduce::supports(ctx, d),
        Op::Norm { .. } | Op::RmsNorm { .. } => norm::supports(ctx, d),
        Op::SoftMax { .. } | Op::DiagMaskInf { .. } => softmax::supports(ctx, d),
        Op::Rope(_) => rope::supports(ctx, d),
        Op::MulMat => mul_mat::supports(ctx, d),
        Op::Concat { .. } | Op::Repeat => concat_repeat::supports(ctx, d),
        Op::MulMatId => mul_mat_id::supports(ctx, d),
        Op::AddId => add_id::supports(ctx, d),
        Op::Argsort { .. } | Op::TopK => sort::supports(ctx, d),
        Op::Cumsum => cumsum::supports(ctx, d),
        Op::SwigluOai { .. } => glu::supports(ctx, d),
        Op::FlashAttnExt { .. } => flash_attn::supports(ctx, d),
        Op::Im2col { .. } => im2col::supports(ctx, d),
        Op::Conv2d(_) | Op::Conv2dDw(_) => conv::supports(ctx, d),
        Op::ConvTranspose1d { .. } | Op::ConvTranspose2d { .. } => conv_transpose::supports(ctx, d),
        Op::Pool1d { .. } | Op::Pool2d { .. } => pool::supports(ctx, d),
        Op::Upscale { .. } => upscale::supports(ctx, d),
        Op::Pad { .. } | Op::PadReflect1d { .. } | Op::Roll { .. } => pad::supports(ctx, d),
        Op::GroupNorm { .. } => group_norm::supports(ctx, d),
        Op::L2Norm { .. } => norm::supports(ctx, d),
        Op::Arange { .. } | Op::TimestepEmbedding { .. } => generate::supports(ctx, d),
        Op::Xielu { .. } => unary::supports(ctx, d),
        Op::Fill { .. } | Op::Tri(_) | Op::Diag => fill_tri::supports(ctx, d),
        Op::DiagMaskZero { .. } => softmax::supports(ctx, d),
        Op::Set { .. } | Op::Acc { .. } => set_acc::supports(ctx, d),
        Op::Add1 => add1::supports(ctx, d),
        Op::CountEqual => count_equal::supports(ctx, d),
        Op::SsmConv => ssm_conv::supports(ctx, d),
        Op::SsmScan { .. } => ssm_scan::supports(ctx, d),
        Op::SolveTri => solve_tri::supports(ctx, d),
        Op::RwkvWkv6 | Op::GatedLinearAttn { .. } | Op::RwkvWkv7 => linear_attn::supports(ctx, d),
        Op::GatedDeltaNet { .. } => delta_net::supports(ctx, d),
        Op::WinPart { .. } | Op::WinUnpart { .. } => window::supports(ctx, d),
        Op::GetRelPos | Op::AddRelPos => rel_pos::supports(ctx, d),
    }
}

/// Computes one node. `memory` is what the backend keeps between nodes and
/// computes (shared scratch, ROPE's angle tables).
pub fn compute_node(ctx: &Context, t: TensorId, par: &Par<'_>, memory: &mut KernelMemory<'_>) -> Result<()> {
    let d = *ctx.desc(t)?;
    if d.op.is_empty() {
        return Ok(());
    }
    if !supports_op(ctx, t) {
        return Err(unsupported(ctx, t, &d));
    }
    if d.nelements() == 0 {
        return Ok(());
    }
    dispatch(ctx, t, &d, par, memory)
}

/// Whether `compute_node` does anything for `d`: views and empty tensors
/// compute nothing.
pub fn computes_anything(d: &TensorDesc) -> bool {
    !d.op.is_empty() && d.nelements() > 0
}

/// Runs node `t`'s kernel: `t` was checked with [`supports_op`] (by
/// `compute_node`, or by a plan against the same context revision).
pub fn dispatch(
    ctx: &Context,
    t: TensorId,
    d: &TensorDesc,
    par: &Par<'_>,
    memory: &mut KernelMemory<'_>,
) -> Result<()> {
    let d = *d;
    match d.op {
        Op::None | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => Ok(()),
        Op::Cpy | Op::Cont | Op::Dup => copy::compute(ctx, t, &d, par),
        Op::GetRows | Op::SetRows => rows::compute(ctx, t, &d, par),
        Op::Binary(op) => binary::compute(ctx, t, &d, op, par),
        Op::Scale { .. } | Op::Clamp { .. } | Op::LeakyRelu { .. } | Op::Unary(_) => unary::compute(ctx, t, &d, par),
        Op::Glu { op, swapped } => glu::compute(ctx, t, &d, glu::Gate::Glu(op), swapped, par),
        Op::SwigluOai { alpha, limit, swapped } => {
            glu::compute(ctx, t, &d, glu::Gate::Oai { alpha, limit }, swapped, par)
        }
        Op::Sum | Op::SumRows | Op::Mean | Op::Argmax => reduce::compute(ctx, t, &d, par),
        Op::Norm { .. } | Op::RmsNorm { .. } => norm::compute(ctx, t, &d, par),
        Op::SoftMax { .. } | Op::DiagMaskInf { .. } => softmax::compute(ctx, t, &d, par),
        Op::Rope(p) => rope::compute(ctx, t, &d, &p, par, memory.rope_angles),
        Op::MulMat => mul_mat::compute(ctx, t, &d, par, memory.shared),
        Op::Concat { .. } | Op::Repeat => concat_repeat::compute(ctx, t, &d, par),
        Op::MulMatId => mul_mat_id::compute(ctx, t, &d, par, memory.shared),
        Op::AddId => add_id::compute(ctx, t, &d, par),
        Op::Argsort { .. } | Op::TopK => sort::compute(ctx, t, &d, par),
        Op::Cumsum => cumsum::compute(ctx, t, &d, par),
        Op::FlashAttnExt { scale, max_bias, softcap } => {
            flash_attn::compute(ctx, t, &d, flash_attn::Params { scale, max_bias, softcap }, par)
        }
        Op::Im2col { conv, is_2d } => im2col::compute(ctx, t, &d, conv, is_2d, par),
        Op::Conv2d(conv) | Op::Conv2dDw(conv) => conv::compute(ctx, t, &d, conv, par),
        Op::ConvTranspose1d { .. } | Op::ConvTranspose2d { .. } => conv_transpose::compute(ctx, t, &d, par),
        Op::Pool1d { .. } | Op::Pool2d { .. } => pool::compute(ctx, t, &d, par),
        Op::Upscale { .. } => upscale::compute(ctx, t, &d, par),
        Op::Pad { .. } | Op::PadReflect1d { .. } | Op::Roll { .. } => pad::compute(ctx, t, &d, par),
        Op::GroupNorm { .. } => group_norm::compute(ctx, t, &d, par),
        Op::L2Norm { .. } => norm::compute(ctx, t, &d, par),
        Op::Arange { .. } | Op::TimestepEmbedding { .. } => generate::compute(ctx, t, &d, par),
        Op::Xielu { .. } => unary::compute(ctx, t, &d, par),
        Op::Fill { .. } | Op::Tri(_) | Op::Diag => fill_tri::compute(ctx, t, &d, par),
        Op::DiagMaskZero { .. } => softmax::compute(ctx, t, &d, par),
        Op::Set { .. } | Op::Acc { .. } => set_acc::compute(ctx, t, &d, par),
        Op::Add1 => add1::compute(ctx, t, &d, par),
        Op::CountEqual => count_equal::compute(ctx, t, &d, par),
        Op::SsmConv => ssm_conv::compute(ctx, t, &d, par),
        Op::SsmScan { .. } => ssm_scan::compute(ctx, t, &d, par),
        Op::SolveTri => solve_tri::compute(ctx, t, &d, par),
        Op::RwkvWkv6 | Op::GatedLinearAttn { .. } | Op::RwkvWkv7 => linear_attn::compute(ctx, t, &d, par),
        Op::GatedDeltaNet { .. } => delta_net::compute(ctx, t, &d, par),
        Op::WinPart { .. } | Op::WinUnpart { .. } => window::compute(ctx, t, &d, par),
        Op::GetRelPos | Op::AddRelPos => rel_pos::compute(ctx, t, &d, par),
    }
}

/// Floats of the backend's shared scratch node `t` needs on `n_threads`
/// threads (a graph plan sizes it once for all its nodes).
pub fn work_floats(ctx: &Context, t: TensorId, d: &TensorDesc, n_threads: usize) -> Result<usize> {
    match d.op {
        Op::MulMat => mul_mat::work_floats(ctx, t, d, n_threads),
        Op::MulMatId => mul_mat_id::work_floats(ctx, t, d, n_threads),
        _ => Ok(0),
    }
}

/// Grows the shared scratch to `len` floats; a failed allocation is
/// [`Error::OutOfMemory`], which the backend reports as
/// `ComputeStatus::AllocFailed`.
pub fn grow_scratch(shared: &mut Vec<f32>, len: usize) -> Result<()> {
    if shared.len() < len {
        shared.try_reserve_exact(len - shared.len()).map_err(|_| Error::OutOfMemory {
            buffer_type: "CPU compute scratch".into(),
            size: len.saturating_mul(size_of::<f32>()),
        })?;
        shared.resize(len, 0.0);
    }
    Ok(())
}

/// The error for a node the CPU cannot compute, listing the source dtypes.
pub fn unsupported(ctx: &Context, t: TensorId, d: &TensorDesc) -> Error {
    let srcs: Vec<String> = d.sources().map(|s| ctx.describe(s)).collect();
    Error::Unsupported(format!(
        "the CPU backend cannot compute {} {} from [{}]",
        d.op.name(),
        ctx.describe(t),
        srcs.join(", ")
    ))
}

/// Source `i` of a node, as an error naming the op when it is missing.
fn src(ctx: &Context, t: TensorId, d: &TensorDesc, i: usize) -> Result<TensorId> {
    d.srcs[i]
        .ok_or_else(|| Error::InvalidOp { op: d.op.name(), reason: format!("{} has no source {i}", ctx.describe(t)) })
}

/// The description of source `i`, when present.
fn src_desc<'a>(ctx: &'a Context, d: &TensorDesc, i: usize) -> Option<&'a TensorDesc> {
    d.srcs[i].and_then(|s| ctx.get(s))
}

/// An error about a node's shapes or layout.
fn shape_err(ctx: &Context, t: TensorId, d: &TensorDesc, reason: impl std::fmt::Display) -> Error {
    Error::InvalidOp { op: d.op.name(), reason: format!("{}: {reason}", ctx.describe(t)) }
}

/// Float dtypes computed element by element.
fn is_float(t: DType) -> bool {
    matches!(t, DType::F32 | DType::F16 | DType::BF16)
}
