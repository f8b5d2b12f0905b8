//! Multi-buffers (ggml's `ggml_backend_multi_buffer`): one handle over
//! several chunk buffers, for memory a buffer type cannot give in one
//! allocation (its `max_size`: wgpu's largest storage binding, 128 MiB on
//! many adapters). Tensors are placed in the chunks, each a buffer of its
//! own in the [`crate::Context`]; the handle sets the usage of all chunks,
//! clears all of them and frees all of them ([`crate::Context::alloc_multi_buffer`]).

use std::any::Any;

use crate::{Buffer, Error, Result};

/// The handle's own buffer-table row: the total size of its chunks and no
/// bytes (tensors live in the chunks, never in the handle).
#[derive(Debug)]
pub struct MultiBuffer {
    size: usize,
    chunks: usize,
}

impl MultiBuffer {
    /// A handle over `chunks` chunks of `size` bytes in all.
    pub fn new(size: usize, chunks: usize) -> Self {
        Self { size, chunks }
    }

    fn no_bytes(&self) -> Error {
        Error::Unsupported(format!(
            "a multi-buffer of {} chunks ({} bytes) holds no bytes itself: its tensors live in its chunks",
            self.chunks, self.size
        ))
    }
}

impl Buffer for MultiBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        None
    }

    fn write(&self, _offset: usize, _data: &[u8]) -> Result<()> {
        Err(self.no_bytes())
    }

    fn read(&self, _offset: usize, _out: &mut [u8]) -> Result<()> {
        Err(self.no_bytes())
    }

    fn fill(&self, _offset: usize, _len: usize, _value: u8) -> Result<()> {
        Err(self.no_bytes())
    }

    fn copy_from(&self, _dst_offset: usize, _src: &dyn Buffer, _src_offset: usize, _len: usize) -> Result<bool> {
        Err(self.no_bytes())
    }

    /// Nothing here: the context clears the chunks.
    fn clear(&self, _value: u8) -> Result<()> {
        Ok(())
    }

    fn is_multi(&self) -> bool {
        true
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
