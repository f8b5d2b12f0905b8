//! Tensor data: writing inputs and weights, reading results.

use crate::context::{GantryContext, GantryTensor, live, with_context};
use crate::entry::{Failure, entry};
use crate::ptr::{slice, slice_mut};
use crate::status::GantryStatus;

/// Writes `n` floats into `t` (an F32, F16 or BF16 tensor with exactly `n`
/// elements, in memory: a weight after `gantry_context_alloc_weights`, an
/// input after `gantry_scheduler_alloc`).
///
/// Threading: as the context. Blocks until the data is in the tensor's memory.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `data` is null or valid for `n` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_tensor_set_f32(
    ctx: GantryContext,
    t: GantryTensor,
    data: *const f32,
    n: usize,
) -> GantryStatus {
    entry("gantry_tensor_set_f32", || {
        // SAFETY: the caller's contract.
        let data = unsafe { slice(data, n, "data")? };
        with_context(ctx, |c| Ok(c.set_f32(live(c, ctx, t)?, data)?))
    })
}

/// Writes `n` 32-bit integers into `t` (an I32 tensor of `n` elements: row
/// indices, positions).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `data` is null or valid for `n` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_tensor_set_i32(
    ctx: GantryContext,
    t: GantryTensor,
    data: *const i32,
    n: usize,
) -> GantryStatus {
    entry("gantry_tensor_set_i32", || {
        // SAFETY: the caller's contract.
        let data = unsafe { slice(data, n, "data")? };
        with_context(ctx, |c| Ok(c.set_i32(live(c, ctx, t)?, data)?))
    })
}

/// Writes `n` bytes, the tensor's whole data in its own layout (any dtype,
/// block formats included).
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `data` is null or valid for `n` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_tensor_set_bytes(
    ctx: GantryContext,
    t: GantryTensor,
    data: *const u8,
    n: usize,
) -> GantryStatus {
    entry("gantry_tensor_set_bytes", || {
        // SAFETY: the caller's contract.
        let data = unsafe { slice(data, n, "data")? };
        with_context(ctx, |c| Ok(c.set_bytes(live(c, ctx, t)?, data)?))
    })
}

/// Reads `t` as floats into `out` (`n` must be its element count; any
/// dtype the engine converts to f32).
///
/// Threading: as the context. Blocks until the data is read.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for `n` writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_tensor_get_f32(
    ctx: GantryContext,
    t: GantryTensor,
    out: *mut f32,
    n: usize,
) -> GantryStatus {
    entry("gantry_tensor_get_f32", || {
        // SAFETY: the caller's contract.
        let out = unsafe { slice_mut(out, n, "out")? };
        with_context(ctx, |c| {
            let t = live(c, ctx, t)?;
            // Checked before anything is read (or a copy of the tensor made).
            let elements = c.desc(t)?.nelements();
            if elements != n {
                return Err(Failure::invalid(format!("the tensor has {elements} elements, the buffer {n}")));
            }
            let values = c.read_f32(t)?;
            if values.len() != n {
                return Err(Failure::invalid(format!("the tensor read {} values, the buffer has {n}", values.len())));
            }
            out.copy_from_slice(&values);
            Ok(())
        })
    })
}
