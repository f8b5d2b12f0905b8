//! Buffers: device memory holding tensor data.

use std::any::Any;

use gantry_arenas::TensorId;

use crate::{Error, ReadStaging, Result, TensorLayout};

/// What a buffer is used for; the scheduler keeps nodes that read a
/// `Weights` buffer on the buffer's backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum BufferUsage {
    /// Any use.
    #[default]
    Any,
    /// Model weights: read by compute, rarely written.
    Weights,
    /// Intermediate results of a graph.
    Compute,
}

/// A block of device memory (ggml's `ggml_backend_buffer`). Offsets are in
/// bytes from the start of the buffer; every access is bounds-checked and an
/// out-of-range one is an `Err`.
///
/// Tensors are placed in buffers by the [`crate::Context`]; the tensor-level
/// set / get / memset / copy live there and call these.
pub trait Buffer: Send + Sync + 'static {
    /// Size in bytes.
    fn size(&self) -> usize;

    /// Address of the first byte when the memory is host memory, else `None`.
    fn host_ptr(&self) -> Option<*mut u8>;

    /// Whether the buffer may be written (a buffer over a read-only file mapping may not).
    fn is_writable(&self) -> bool {
        true
    }

    /// Copies `data` to `offset`.
    fn write(&self, offset: usize, data: &[u8]) -> Result<()>;

    /// Copies `out.len()` bytes from `offset` into `out`.
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()>;

    /// Sets `len` bytes at `offset` to `value`.
    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()>;

    /// Copies `len` bytes from `src` at `src_offset` to `dst_offset` in this
    /// buffer when this buffer can read `src` directly; returns `Ok(false)`
    /// when it cannot, so the caller stages the copy through host memory.
    fn copy_from(&self, dst_offset: usize, src: &dyn Buffer, src_offset: usize, len: usize) -> Result<bool>;

    /// Writes `data` at `offset` without being sent it, when this buffer's
    /// device can find the same bytes itself (a remote server holding the
    /// model file they come from, named by their digest); `Ok(false)` when it
    /// cannot, and the caller writes them. For model weights; the default
    /// finds nothing.
    fn write_from_cache(&self, offset: usize, data: &[u8]) -> Result<bool> {
        let _ = (offset, data);
        Ok(false)
    }

    /// Prepares a read of `len` bytes at `offset` into host memory that
    /// does not block, through a staged read this buffer's backend keeps in
    /// `staging` (see [`crate::TensorRead`], which calls this; reuse the
    /// object found there, [`ReadStaging::get_or_default`], so that reading
    /// the same output again allocates nothing). Nothing is submitted yet.
    /// `Ok(true)` when staged; the default, `Ok(false)`, says the bytes are
    /// readable from host memory once the compute that writes them has
    /// finished (the CPU, host buffers, and any device whose plain read
    /// after the compute is as good).
    fn begin_read(&self, offset: usize, len: usize, staging: &mut ReadStaging) -> Result<bool> {
        let _ = (offset, len, staging);
        Ok(false)
    }

    /// Sets every byte to `value`.
    fn clear(&self, value: u8) -> Result<()> {
        self.fill(0, self.size(), value)
    }

    /// Called when `tensor` (of `layout`) is placed at `offset` in this
    /// buffer (ggml's `init_tensor`), after the placement was checked:
    /// backends that keep side data per tensor (a repacked weight layout, a
    /// descriptor) make it here; an `Err` (naming the tensor) undoes the
    /// placement. Views are not placed (their bytes are their source's) and
    /// get no call, as in ggml's CUDA backend. Nothing for plain memory.
    fn init_tensor(&self, tensor: TensorId, layout: &TensorLayout, offset: usize) -> Result<()> {
        let _ = (tensor, layout, offset);
        Ok(())
    }

    /// Forgets all per-tensor state (ggml's `ggml_backend_buffer_reset`):
    /// the graph allocator calls it on a compute buffer it reuses for a new
    /// plan, before placing the plan's tensors (each with
    /// [`Buffer::init_tensor`]) again. Nothing for plain memory.
    fn reset(&self) {}

    /// Whether this is a multi-buffer's handle ([`crate::MultiBuffer`]),
    /// whose tensors live in its chunks.
    fn is_multi(&self) -> bool {
        false
    }

    /// For downcasting to the concrete type.
    fn as_any(&self) -> &dyn Any;
}

/// Checks that `len` bytes at `offset` lie inside a buffer of `size` bytes.
///
/// ```
/// use gantry_engine::check_range;
/// assert!(check_range("CPU", 16, 8, 8).is_ok());
/// assert!(check_range("CPU", 16, 9, 8).is_err());
/// assert!(check_range("CPU", 16, usize::MAX, 2).is_err());
/// ```
pub fn check_range(buffer: &str, size: usize, offset: usize, len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::OutOfBounds(format!(
            "{len} bytes at offset {offset} do not fit in {buffer} buffer of {size} bytes"
        ))),
    }
}
