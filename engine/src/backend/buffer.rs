//! Buffers: device memory holding tensor data.

use std::any::Any;

use crate::{Error, Result};

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

    /// Sets every byte to `value`.
    fn clear(&self, value: u8) -> Result<()> {
        self.fill(0, self.size(), value)
    }

    /// Forgets any per-tensor state (nothing for plain memory).
    fn reset(&self) {}

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
