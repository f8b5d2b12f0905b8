//! Ops: each builds a new tensor from its operands, checking shapes and
//! dtypes (a mismatch is `GANTRY_ERROR_INVALID_ARGUMENT`, and nothing is
//! added). `out` receives the result tensor.
//!
//! Threading, for every op: as the context (calls on one context are
//! serialized). Safety, for every op: `out` is null or valid for one write
//! (and `ne`, where taken, null or valid for `n_dims` reads).
//!
//! The functions are written out one by one (no macro) because cbindgen
//! reads the source as written.

use gantry::engine::Limits;
use gantry::{Context, MAX_DIMS, Result, TensorId};

use crate::context::{GantryContext, GantryTensor, live, tensor_out, with_context};
use crate::entry::{Failure, entry};
use crate::ptr::{slice, write_out};
use crate::status::GantryStatus;

/// Runs the op `build` in `ctx` and writes its tensor to `out`.
///
/// # Safety
/// `out` is null or valid for one write.
unsafe fn op(
    name: &'static str,
    ctx: GantryContext,
    out: *mut GantryTensor,
    build: impl FnOnce(&mut Context) -> Result<TensorId, Failure>,
) -> GantryStatus {
    entry(name, || {
        if out.is_null() {
            return Err(Failure::invalid("out is a null pointer"));
        }
        let t = with_context(ctx, build)?;
        // SAFETY: the caller's contract.
        unsafe { write_out(out, tensor_out(ctx, t), "out") }
    })
}

/// Sizes from C (`n_dims` of them, each positive, and together within the
/// elements a tensor may have: [`Limits::max_tensor_elements`]).
///
/// # Safety
/// `ne` is null or valid for `n_dims` reads.
pub(crate) unsafe fn shape_from(ne: *const i64, n_dims: usize) -> Result<Vec<usize>, Failure> {
    if !(1..=MAX_DIMS).contains(&n_dims) {
        return Err(Failure::invalid(format!("n_dims must be 1 to {MAX_DIMS}, not {n_dims}")));
    }
    // SAFETY: the caller's contract.
    let ne = unsafe { slice(ne, n_dims, "ne")? };
    let shape: Vec<usize> = ne
        .iter()
        .map(|&n| usize::try_from(n).ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| Failure::invalid(format!("sizes must be positive: {ne:?}")))?;
    // Before any size or stride is computed from them (which could overflow).
    Limits::DEFAULT.check_shape(&shape).map_err(Failure::invalid)?;
    Ok(shape)
}

/// `a + b`, `b` broadcast over `a` (its sizes divide `a`'s).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_add(
    ctx: GantryContext,
    a: GantryTensor,
    b: GantryTensor,
    out: *mut GantryTensor,
) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_add", ctx, out, |c| Ok(c.add(live(c, ctx, a)?, live(c, ctx, b)?)?)) }
}

/// `a - b`, broadcasting `b`.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_sub(
    ctx: GantryContext,
    a: GantryTensor,
    b: GantryTensor,
    out: *mut GantryTensor,
) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_sub", ctx, out, |c| Ok(c.sub(live(c, ctx, a)?, live(c, ctx, b)?)?)) }
}

/// `a * b` elementwise, broadcasting `b`.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_mul(
    ctx: GantryContext,
    a: GantryTensor,
    b: GantryTensor,
    out: *mut GantryTensor,
) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_mul", ctx, out, |c| Ok(c.mul(live(c, ctx, a)?, live(c, ctx, b)?)?)) }
}

/// `a / b` elementwise, broadcasting `b`.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_div(
    ctx: GantryContext,
    a: GantryTensor,
    b: GantryTensor,
    out: *mut GantryTensor,
) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_div", ctx, out, |c| Ok(c.div(live(c, ctx, a)?, live(c, ctx, b)?)?)) }
}

/// The matrix product of ggml: `a` is `[k, m]` (weights: `m` rows of `k`),
/// `b` is `[k, n]`; the result is `[m, n]` in f32.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_mul_mat(
    ctx: GantryContext,
    a: GantryTensor,
    b: GantryTensor,
    out: *mut GantryTensor,
) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_mul_mat", ctx, out, |c| Ok(c.mul_mat(live(c, ctx, a)?, live(c, ctx, b)?)?)) }
}

/// Rows of `a` picked by the I32 indices `b`.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_get_rows(
    ctx: GantryContext,
    a: GantryTensor,
    b: GantryTensor,
    out: *mut GantryTensor,
) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_get_rows", ctx, out, |c| Ok(c.get_rows(live(c, ctx, a)?, live(c, ctx, b)?)?)) }
}

/// `x * sigmoid(x)`.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_silu(ctx: GantryContext, a: GantryTensor, out: *mut GantryTensor) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_silu", ctx, out, |c| Ok(c.silu(live(c, ctx, a)?)?)) }
}

/// GELU (tanh approximation).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_gelu(ctx: GantryContext, a: GantryTensor, out: *mut GantryTensor) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_gelu", ctx, out, |c| Ok(c.gelu(live(c, ctx, a)?)?)) }
}

/// `max(x, 0)`.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_relu(ctx: GantryContext, a: GantryTensor, out: *mut GantryTensor) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_relu", ctx, out, |c| Ok(c.relu(live(c, ctx, a)?)?)) }
}

/// Softmax along rows (`ne0`).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_soft_max(ctx: GantryContext, a: GantryTensor, out: *mut GantryTensor) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_soft_max", ctx, out, |c| Ok(c.soft_max(live(c, ctx, a)?)?)) }
}

/// The sum of each row: `[1, ne1, ne2, ne3]`.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_sum_rows(ctx: GantryContext, a: GantryTensor, out: *mut GantryTensor) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_sum_rows", ctx, out, |c| Ok(c.sum_rows(live(c, ctx, a)?)?)) }
}

/// The transpose (a view swapping the first two dimensions).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_transpose(ctx: GantryContext, a: GantryTensor, out: *mut GantryTensor) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_transpose", ctx, out, |c| Ok(c.transpose(live(c, ctx, a)?)?)) }
}

/// A contiguous copy.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_cont(ctx: GantryContext, a: GantryTensor, out: *mut GantryTensor) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_cont", ctx, out, |c| Ok(c.cont(live(c, ctx, a)?)?)) }
}

/// `a * scale + bias`.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_scale(
    ctx: GantryContext,
    a: GantryTensor,
    scale: f32,
    bias: f32,
    out: *mut GantryTensor,
) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_scale", ctx, out, |c| Ok(c.scale(live(c, ctx, a)?, scale, bias)?)) }
}

/// RMS normalization along rows: `x / sqrt(mean(x²) + eps)`.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_rms_norm(
    ctx: GantryContext,
    a: GantryTensor,
    eps: f32,
    out: *mut GantryTensor,
) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe { op("gantry_rms_norm", ctx, out, |c| Ok(c.rms_norm(live(c, ctx, a)?, eps)?)) }
}

/// The same data with the `n_dims` sizes `ne` (the element count must match).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `ne` is null or valid for `n_dims` reads; `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_reshape(
    ctx: GantryContext,
    a: GantryTensor,
    n_dims: usize,
    ne: *const i64,
    out: *mut GantryTensor,
) -> GantryStatus {
    // SAFETY: the caller's contract.
    unsafe {
        op("gantry_reshape", ctx, out, |c| {
            let shape = shape_from(ne, n_dims)?;
            Ok(c.reshape(live(c, ctx, a)?, &shape)?)
        })
    }
}
