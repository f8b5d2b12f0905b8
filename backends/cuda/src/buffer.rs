//! Device memory: the CUDA buffer type and its buffers. Their own
//! set / get / memset / copy are synchronous (the tensor-level calls of a
//! `Context`): they run on the legacy default stream and wait for it, which
//! does not wait for the backends' streams, so callers synchronize a
//! backend before touching memory it computes (as the scheduler does).

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::{result, sys};
use gantry_engine::{Buffer, BufferType, Device, Error, Result, check_range};

use super::device::DeviceLink;
use super::gpu::Gpu;

/// Tensor offsets in device buffers are aligned to this (ggml's CUDA value:
/// enough for vector loads of any dtype).
pub const DEVICE_ALIGNMENT: usize = 128;

/// Device memory of one GPU.
pub struct CudaBufferType {
    gpu: Arc<Gpu>,
    device: DeviceLink,
}

impl CudaBufferType {
    pub(crate) fn new(gpu: Arc<Gpu>, device: DeviceLink) -> Self {
        Self { gpu, device }
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}

impl BufferType for CudaBufferType {
    fn name(&self) -> &str {
        &self.gpu.name
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        Ok(Box::new(CudaBuffer::alloc(&self.gpu, size)?))
    }

    fn alignment(&self) -> usize {
        DEVICE_ALIGNMENT
    }

    fn max_size(&self) -> usize {
        self.gpu.facts.total_memory
    }

    fn is_host(&self) -> bool {
        false
    }

    fn device(&self) -> Option<Arc<dyn Device>> {
        self.device.device()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One device allocation (`cuMemAlloc`), freed when dropped.
pub struct CudaBuffer {
    gpu: Arc<Gpu>,
    ptr: sys::CUdeviceptr,
    size: usize,
}

impl CudaBuffer {
    /// `size` bytes on `gpu` (a zero-size buffer allocates nothing).
    pub fn alloc(gpu: &Arc<Gpu>, size: usize) -> Result<Self> {
        let ptr = if size == 0 {
            0
        } else {
            gpu.context()?;
            // SAFETY: the context is current; the memory is only used through this buffer.
            unsafe { result::malloc_sync(size) }.map_err(|e| match e.0 {
                sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => {
                    Error::OutOfMemory { buffer_type: gpu.name.clone(), size }
                }
                _ => gpu.error(&format!("cuMemAlloc of {size} bytes"), e),
            })?
        };
        Ok(Self { gpu: gpu.clone(), ptr, size })
    }

    /// The device address of byte 0.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Its size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.size
    }

    /// The device holding it.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        check_range(&self.gpu.name, self.size, offset, len)
    }

    /// Waits for the legacy default stream, where this buffer's own copies run.
    fn finish(&self, what: &str) -> Result<()> {
        // SAFETY: the null stream always exists in a current context.
        unsafe { result::stream::synchronize(std::ptr::null_mut()) }.map_err(|e| self.gpu.error(what, e))
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ptr != 0 && self.gpu.context().is_ok() {
            // SAFETY: allocated by cuMemAlloc and freed once; cuMemFree waits
            // for the device to finish with it.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

impl Buffer for CudaBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        None
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.gpu.context()?;
        // SAFETY: the range is inside the allocation (checked); `data` outlives
        // the copy, which is finished before returning.
        unsafe { result::memcpy_htod_async(self.ptr + offset as u64, data, std::ptr::null_mut()) }
            .map_err(|e| self.gpu.error("cuMemcpyHtoD", e))?;
        self.finish("cuMemcpyHtoD")
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        self.gpu.context()?;
        // SAFETY: as in `write`, for a read into `out`.
        unsafe { result::memcpy_dtoh_async(out, self.ptr + offset as u64, std::ptr::null_mut()) }
            .map_err(|e| self.gpu.error("cuMemcpyDtoH", e))?;
        self.finish("cuMemcpyDtoH")
    }

    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        self.check(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.gpu.context()?;
        // SAFETY: the range is inside the allocation (checked).
        unsafe { result::memset_d8_async(self.ptr + offset as u64, value, len, std::ptr::null_mut()) }
            .map_err(|e| self.gpu.error("cuMemsetD8", e))?;
        self.finish("cuMemsetD8")
    }

    /// Device-to-device on the same GPU, and peer copies from another.
    fn copy_from(&self, dst_offset: usize, src: &dyn Buffer, src_offset: usize, len: usize) -> Result<bool> {
        let Some(src) = src.as_any().downcast_ref::<CudaBuffer>() else { return Ok(false) };
        self.check(dst_offset, len)?;
        src.check(src_offset, len)?;
        if len == 0 {
            return Ok(true);
        }
        let (dst_ptr, src_ptr) = (self.ptr + dst_offset as u64, src.ptr + src_offset as u64);
        let dst_ctx = self.gpu.context()?.cu_ctx();
        if Arc::ptr_eq(&self.gpu, &src.gpu) {
            // SAFETY: both ranges are inside their allocations (checked).
            unsafe { result::memcpy_dtod_async(dst_ptr, src_ptr, len, std::ptr::null_mut()) }
                .map_err(|e| self.gpu.error("cuMemcpyDtoD", e))?;
        } else {
            let src_ctx = src.gpu.context()?.cu_ctx();
            self.gpu.context()?;
            // SAFETY: as above, across two devices' contexts.
            unsafe { result::memcpy_peer_async(dst_ctx, dst_ptr, src_ctx, src_ptr, len, std::ptr::null_mut()) }
                .map_err(|e| self.gpu.error(&format!("cuMemcpyPeer from {}", src.gpu.name), e))?;
        }
        self.finish("copying between device buffers")?;
        Ok(true)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
