//! Contexts (the tensor tables) and tensors: creating them, their flags,
//! shapes, and placing weights in a backend's memory.

use std::ffi::c_char;
use std::sync::LazyLock;

use gantry::engine::Limits;
use gantry::{BufferUsage, Context, DType, MAX_DIMS, TensorId};
use slotmap::{Key, KeyData};

use crate::backend::{GantryBackend, backend_of};
use crate::entry::{CallResult, Failure, entry};
use crate::handles::{Table, lock};
use crate::ptr::{read_str, slice, write_out};
use crate::status::GantryStatus;

/// A context: tensors (descriptions, placements, data) and the buffers
/// holding them.
///
/// A zero-initialized value (`{0}`) is the null handle.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GantryContext {
    /// The handle's number (0 = null). Opaque: only copy or compare it.
    pub id: u64,
}

/// A tensor of a context: valid with that context only.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GantryTensor {
    /// The tensor's number in its context (0 = null). Opaque.
    pub id: u64,
}

pub(crate) static CONTEXTS: LazyLock<Table<Context>> = LazyLock::new(|| Table::new("context", 0x4358));

/// Element types (ggml's, block formats bit-exact).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GantryDType {
    /// 32-bit float.
    GantryF32 = 0,
    /// 16-bit IEEE float.
    GantryF16 = 1,
    /// bfloat16.
    GantryBf16 = 2,
    /// 32-bit signed integer (indices, positions).
    GantryI32 = 3,
    /// 4-bit blocks of 32 (f16 scale).
    GantryQ4_0 = 4,
    /// 4-bit blocks of 32 (f16 scale and min).
    GantryQ4_1 = 5,
    /// 8-bit blocks of 32 (f16 scale).
    GantryQ8_0 = 6,
}

impl GantryDType {
    const ALL: [Self; 7] = [
        Self::GantryF32,
        Self::GantryF16,
        Self::GantryBf16,
        Self::GantryI32,
        Self::GantryQ4_0,
        Self::GantryQ4_1,
        Self::GantryQ8_0,
    ];

    /// The dtype a C integer names (C may pass any value: enums are taken as integers).
    fn from_c(value: i32) -> Result<Self, Failure> {
        Self::ALL
            .into_iter()
            .find(|d| *d as i32 == value)
            .ok_or_else(|| Failure::invalid(format!("{value} is not a GantryDType")))
    }

    fn dtype(self) -> DType {
        match self {
            Self::GantryF32 => DType::F32,
            Self::GantryF16 => DType::F16,
            Self::GantryBf16 => DType::BF16,
            Self::GantryI32 => DType::I32,
            Self::GantryQ4_0 => DType::Q4_0,
            Self::GantryQ4_1 => DType::Q4_1,
            Self::GantryQ8_0 => DType::Q8_0,
        }
    }
}

/// Runs `f` on the context behind `ctx`.
pub(crate) fn with_context<R>(
    ctx: GantryContext,
    f: impl FnOnce(&mut Context) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let context = CONTEXTS.get(ctx.id)?;
    let mut context = lock(&context, "context")?;
    f(&mut context)
}

/// The bits a tensor handle of context `ctx` carries XOR-ed into its key's
/// top 16 (the engine's keys leave them zero until a slot is reused 65,536
/// times, and the XOR undoes either way): derived from the context's
/// handle, so a tensor of another live context, or of a freed one, decodes
/// to a key of no tensor here (all but one time in 65,536) instead of
/// naming whichever tensor of the same number this context has.
fn context_tag(ctx: GantryContext) -> u64 {
    // A multiplicative hash spreads the handle's index and generation over
    // the top bits; never zero, so no context's handles are the raw keys.
    (ctx.id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48 | 1) << 48
}

/// The engine's id for a C tensor of `ctx` (not yet checked against the
/// context: the engine answers a stale or foreign one with
/// `GANTRY_ERROR_INVALID_HANDLE`).
pub(crate) fn tensor_id(ctx: GantryContext, t: GantryTensor) -> Result<TensorId, Failure> {
    if t.id == 0 {
        return Err(Failure::new(GantryStatus::GantryErrorInvalidHandle, "null tensor"));
    }
    // A made-up number is a key of no live tensor: the engine reports it stale.
    Ok(TensorId::from(KeyData::from_ffi(t.id ^ context_tag(ctx))))
}

/// The engine's id for a C tensor that is live in `c`, the context behind
/// `ctx` (a stale, made-up or foreign one is `GANTRY_ERROR_INVALID_HANDLE`,
/// before any op looks at it).
pub(crate) fn live(c: &Context, ctx: GantryContext, t: GantryTensor) -> Result<TensorId, Failure> {
    let id = tensor_id(ctx, t)?;
    c.desc(id).map_err(|_| {
        Failure::new(
            GantryStatus::GantryErrorInvalidHandle,
            format!("tensor {:#x} is not a live tensor of this context (freed, made up, or another context's)", t.id),
        )
    })?;
    Ok(id)
}

/// Fails unless `n`, a number of tensors a C caller passes (`what` in the
/// message), is at most [`Limits::max_tensors`]: it sizes a list before any
/// of them is looked at.
pub(crate) fn check_tensor_count(what: &str, n: usize) -> CallResult {
    let max = Limits::DEFAULT.max_tensors;
    Limits::DEFAULT.check_count(what, n as u64, max).map(drop).map_err(Failure::invalid)
}

/// The C handle of a tensor of `ctx`.
pub(crate) fn tensor_out(ctx: GantryContext, t: TensorId) -> GantryTensor {
    GantryTensor { id: t.data().as_ffi() ^ context_tag(ctx) }
}

/// A new, empty context.
///
/// Threading: any thread. A context may be used from several threads; calls
/// on it are serialized (a compute holds it for its whole duration).
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_context_new(out: *mut GantryContext) -> GantryStatus {
    entry("gantry_context_new", || {
        // SAFETY: the caller's contract.
        unsafe { write_out(out, GantryContext { id: CONTEXTS.insert(Context::new()) }, "out") }
    })
}

/// Frees a context, its tensors and buffers. Its tensor handles become stale.
///
/// Threading: any thread; waits for calls in flight on it.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_context_free(ctx: GantryContext) -> GantryStatus {
    entry("gantry_context_free", || CONTEXTS.remove(ctx.id).map(drop))
}

/// A new tensor of `dtype` (a `GantryDType` value) with `n_dims` (1 to 4) sizes `ne` (innermost
/// first, as ggml's `ne`), not yet in any memory.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `ne` is null or valid for `n_dims` reads; `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_tensor_new(
    ctx: GantryContext,
    dtype: i32,
    n_dims: usize,
    ne: *const i64,
    out: *mut GantryTensor,
) -> GantryStatus {
    entry("gantry_tensor_new", || {
        let dtype = GantryDType::from_c(dtype)?;
        // SAFETY: the caller's contract.
        let shape = unsafe { crate::ops::shape_from(ne, n_dims)? };
        if out.is_null() {
            return Err(Failure::invalid("out is a null pointer"));
        }
        let t = with_context(ctx, |c| Ok(c.tensor(dtype.dtype(), &shape)?))?;
        // SAFETY: the caller's contract.
        unsafe { write_out(out, tensor_out(ctx, t), "out") }
    })
}

/// Marks `t` as a graph input (the scheduler gives it memory; write it after
/// `gantry_scheduler_alloc`).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_tensor_set_input(ctx: GantryContext, t: GantryTensor) -> GantryStatus {
    entry("gantry_tensor_set_input", || with_context(ctx, |c| Ok(c.set_input(tensor_id(ctx, t)?)?)))
}

/// Marks `t` as a graph output (its memory is not reused before it is read).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_tensor_set_output(ctx: GantryContext, t: GantryTensor) -> GantryStatus {
    entry("gantry_tensor_set_output", || with_context(ctx, |c| Ok(c.set_output(tensor_id(ctx, t)?)?)))
}

/// Names `t` (for messages and debugging; up to 63 bytes kept).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_tensor_set_name(
    ctx: GantryContext,
    t: GantryTensor,
    name: *const c_char,
) -> GantryStatus {
    entry("gantry_tensor_set_name", || {
        // SAFETY: the caller's contract.
        let name = unsafe { read_str(name, "name")? };
        with_context(ctx, |c| c.set_name(tensor_id(ctx, t)?, name).map(drop).map_err(Failure::from))
    })
}

/// `t`'s sizes (4, innermost first; unused dimensions are 1) into `ne` and,
/// when `dtype` is not null, its element type there (types outside
/// `GantryDType` answer `GANTRY_ERROR_UNSUPPORTED`).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `ne` is null or valid for 4 writes; `dtype` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_tensor_shape(
    ctx: GantryContext,
    t: GantryTensor,
    ne: *mut i64,
    dtype: *mut GantryDType,
) -> GantryStatus {
    entry("gantry_tensor_shape", || {
        let (shape, dt) = with_context(ctx, |c| {
            let desc = c.desc(tensor_id(ctx, t)?)?;
            Ok((desc.ne, desc.dtype))
        })?;
        // SAFETY: the caller's contract.
        let ne = unsafe { crate::ptr::slice_mut(ne, MAX_DIMS, "ne")? };
        for (out, n) in ne.iter_mut().zip(shape) {
            *out = n as i64;
        }
        if !dtype.is_null() {
            let c = GantryDType::ALL.into_iter().find(|c| c.dtype() == dt).ok_or_else(|| {
                Failure::new(GantryStatus::GantryErrorUnsupported, format!("dtype {dt} has no C name"))
            })?;
            // SAFETY: the caller's contract.
            unsafe { write_out(dtype, c, "dtype")? };
        }
        Ok(())
    })
}

/// Places `tensors` (weights, constants) in one buffer of `backend`'s device
/// memory, so they can be written now and read by every compute. Inputs and
/// intermediate tensors need no call: the scheduler places them.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `tensors` is null or valid for `n` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_context_alloc_weights(
    ctx: GantryContext,
    backend: GantryBackend,
    tensors: *const GantryTensor,
    n: usize,
) -> GantryStatus {
    entry("gantry_context_alloc_weights", || -> CallResult {
        check_tensor_count("n", n)?;
        // SAFETY: the caller's contract.
        let tensors = unsafe { slice(tensors, n, "tensors")? };
        let ids: Vec<TensorId> = tensors.iter().map(|&t| tensor_id(ctx, t)).collect::<Result<_, _>>()?;
        let backend = backend_of(backend)?;
        let buft = backend.device().buffer_type();
        with_context(ctx, |c| c.alloc_tensors(&ids, &buft, BufferUsage::Weights).map(drop).map_err(Failure::from))
    })
}
