//! Reads of a wgpu device's memory into host memory that do not block: the
//! engine's staged read ([`gantry_engine::TensorRead`], begun through
//! [`gantry_engine::Buffer::begin_read`]) is a [`GpuReadBack`] here.
//!
//! A blocking read (`Context::read_tensor_bytes`) waits for its copy and the
//! mapping inside the call. This one queues the copy into a staging buffer
//! and its mapping (behind the compute that writes the tensor, on the same
//! in-order queue), answers polls with one non-blocking device poll, and
//! copies the bytes out of the mapped staging buffer once it is there. The
//! staging buffer lives in the caller's `TensorRead` slot, kept from read
//! to read, so a loop reading the same output every frame or token makes
//! it once (`GpuReadBack::staging_buffers_made`).

use gantry_engine::{ReadStaging, Result, StagedRead};

use super::WgpuBuffer;
use super::gpu::GpuReadBack;

impl StagedRead for GpuReadBack {
    fn is_prepared(&self) -> bool {
        GpuReadBack::is_prepared(self)
    }

    fn submit(&mut self) -> Result<()> {
        GpuReadBack::submit(self)
    }

    fn poll(&mut self) -> Result<bool> {
        GpuReadBack::poll(self)
    }

    fn wait(&mut self) -> Result<()> {
        GpuReadBack::wait(self)
    }

    fn take(&mut self, out: &mut [u8]) -> Result<()> {
        GpuReadBack::take(self, out)
    }

    fn discard(&mut self) -> Result<()> {
        GpuReadBack::discard(self)
    }
}

/// [`gantry_engine::Buffer::begin_read`] for a wgpu buffer: the read of
/// `len` bytes at `offset` prepared in the [`GpuReadBack`] kept in
/// `staging` (made there at the first read).
pub(crate) fn begin_read(buffer: &WgpuBuffer, offset: usize, len: usize, staging: &mut ReadStaging) -> Result<bool> {
    let read = staging.get_or_default::<GpuReadBack>()?;
    read.prepare(buffer.mem(), offset as u64, len as u64)?;
    Ok(true)
}
