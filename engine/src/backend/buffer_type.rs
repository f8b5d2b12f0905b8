//! Buffer types: the kinds of memory a device can allocate.

use std::any::Any;
use std::sync::Arc;

use crate::{Buffer, Result, TensorLayout};

/// A kind of buffer a device allocates (ggml's `ggml_backend_buffer_type`).
///
/// Buffer types are shared as `Arc<dyn BufferType>`; two handles name the
/// same buffer type when they point at the same object ([`same_buffer_type`]).
pub trait BufferType: Send + Sync + 'static {
    /// A name unique among the buffer types of a registry (`"CPU"`, `"Vulkan0"`).
    fn name(&self) -> &str;

    /// Allocates a buffer of `size` bytes. A zero-size request returns a
    /// valid empty buffer.
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>>;

    /// Alignment of tensor offsets inside a buffer, in bytes (a power of two).
    fn alignment(&self) -> usize;

    /// Largest buffer one allocation may have.
    fn max_size(&self) -> usize {
        usize::MAX
    }

    /// Bytes a tensor of this layout takes in a buffer of this type (some
    /// devices pad rows).
    fn alloc_size(&self, layout: &TensorLayout) -> usize {
        layout.nbytes()
    }

    /// Whether the memory is host memory the CPU can read and write directly.
    fn is_host(&self) -> bool;

    /// Name of the device owning this buffer type.
    fn device_name(&self) -> &str;

    /// For downcasting to the concrete type.
    fn as_any(&self) -> &dyn Any;
}

/// Whether two handles name the same buffer type.
pub fn same_buffer_type(a: &Arc<dyn BufferType>, b: &Arc<dyn BufferType>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}
