//! Host memory the GPU copies to and from at full speed: a pinned buffer
//! type (`cuMemHostAlloc`) and buffers over caller memory pinned in place
//! (`cuMemHostRegister`, e.g. a mapped model file). Both are host memory:
//! the CPU backend computes in them, and `Context` copies use their host
//! pointer.

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::{result, sys};
use gantry_engine::{Buffer, BufferType, Device, Error, HostMemory, Result, check_range};

use super::device::DeviceLink;
use super::gpu::Gpu;

/// Pinned host memory of one GPU's platform (`"cuda0_host"`).
pub struct CudaHostBufferType {
    gpu: Arc<Gpu>,
    name: String,
    device: DeviceLink,
}

impl CudaHostBufferType {
    pub(crate) fn new(gpu: Arc<Gpu>, device: DeviceLink) -> Self {
        let name = format!("{}_host", gpu.name);
        Self { gpu, name, device }
    }
}

impl BufferType for CudaHostBufferType {
    fn name(&self) -> &str {
        &self.name
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        let ptr = if size == 0 {
            std::ptr::null_mut()
        } else {
            self.gpu.context()?;
            // SAFETY: the context is current; the memory is owned by the buffer below.
            unsafe { result::malloc_host(size, sys::CU_MEMHOSTALLOC_PORTABLE) }
                .map_err(|_| Error::OutOfMemory { buffer_type: self.name.clone(), size })?
                .cast::<u8>()
        };
        Ok(Box::new(HostBuffer { gpu: self.gpu.clone(), ptr, size, owner: Owner::Pinned, writable: true }))
    }

    fn alignment(&self) -> usize {
        gantry_engine::HOST_ALIGNMENT
    }

    fn is_host(&self) -> bool {
        true
    }

    fn device(&self) -> Option<Arc<dyn Device>> {
        self.device.device()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The buffer type buffers over registered caller memory belong to (`"cuda0_mapped"`).
pub struct CudaMappedBufferType {
    gpu: Arc<Gpu>,
    name: String,
    device: DeviceLink,
}

impl CudaMappedBufferType {
    pub(crate) fn new(gpu: Arc<Gpu>, device: DeviceLink) -> Self {
        let name = format!("{}_mapped", gpu.name);
        Self { gpu, name, device }
    }

    /// A buffer over `memory`, pinned for `gpu` while the buffer lives.
    pub(crate) fn register(&self, memory: HostMemory) -> Result<HostBuffer> {
        let size = memory.len();
        let ptr = memory.as_ptr();
        if size > 0 {
            self.gpu.context()?;
            let flags = sys::CU_MEMHOSTREGISTER_PORTABLE
                | if memory.is_writable() { 0 } else { sys::CU_MEMHOSTREGISTER_READ_ONLY };
            // SAFETY: `memory` is valid for `size` bytes while its owner lives,
            // which the buffer keeps; it is unregistered before being released.
            unsafe { sys::cuMemHostRegister_v2(ptr.cast(), size, flags) }
                .result()
                .map_err(|e| self.gpu.error(&format!("cuMemHostRegister of {size} bytes"), e))?;
        }
        let writable = memory.is_writable();
        Ok(HostBuffer { gpu: self.gpu.clone(), ptr, size, owner: Owner::Registered { _memory: memory }, writable })
    }
}

impl BufferType for CudaMappedBufferType {
    fn name(&self) -> &str {
        &self.name
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        Err(Error::Unsupported(format!(
            "{}: buffers of registered memory are made from caller memory, not allocated ({size} bytes asked)",
            self.name
        )))
    }

    fn alignment(&self) -> usize {
        gantry_engine::MAPPED_ALIGNMENT
    }

    fn is_host(&self) -> bool {
        true
    }

    fn device(&self) -> Option<Arc<dyn Device>> {
        self.device.device()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

enum Owner {
    /// From `cuMemHostAlloc`: freed with `cuMemFreeHost`.
    Pinned,
    /// Caller memory, registered: unregistered, then released with the owner.
    Registered {
        /// Keeps the caller's memory alive while the buffer lives.
        _memory: HostMemory,
    },
}

/// Host memory pinned for a GPU.
pub struct HostBuffer {
    gpu: Arc<Gpu>,
    ptr: *mut u8,
    size: usize,
    owner: Owner,
    writable: bool,
}

// SAFETY: the memory is plain host memory owned by (or kept alive by) the
// buffer; accesses go through bounds-checked copies.
unsafe impl Send for HostBuffer {}
// SAFETY: as above.
unsafe impl Sync for HostBuffer {}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if self.size == 0 || self.gpu.context().is_err() {
            return;
        }
        match &self.owner {
            // SAFETY: allocated by cuMemHostAlloc, freed once.
            Owner::Pinned => drop(unsafe { result::free_host(self.ptr.cast()) }),
            // SAFETY: registered by `register`, unregistered once, before the owner goes.
            Owner::Registered { .. } => drop(unsafe { sys::cuMemHostUnregister(self.ptr.cast()) }),
        }
    }
}

impl HostBuffer {
    fn check(&self, offset: usize, len: usize) -> Result<()> {
        check_range(&self.gpu.name, self.size, offset, len)
    }
}

impl Buffer for HostBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.ptr)
    }

    fn is_writable(&self) -> bool {
        self.writable
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        if !self.writable {
            return Err(Error::Unsupported(format!("{}: the registered memory is read-only", self.gpu.name)));
        }
        // SAFETY: in bounds (checked); the memory lives as long as the buffer.
        unsafe { std::ptr::copy(data.as_ptr(), self.ptr.add(offset), data.len()) };
        Ok(())
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        // SAFETY: in bounds (checked).
        unsafe { std::ptr::copy(self.ptr.add(offset), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        self.check(offset, len)?;
        if !self.writable {
            return Err(Error::Unsupported(format!("{}: the registered memory is read-only", self.gpu.name)));
        }
        // SAFETY: in bounds (checked).
        unsafe { std::ptr::write_bytes(self.ptr.add(offset), value, len) };
        Ok(())
    }

    fn copy_from(&self, dst_offset: usize, src: &dyn Buffer, src_offset: usize, len: usize) -> Result<bool> {
        let Some(base) = src.host_ptr() else { return Ok(false) };
        check_range("source", src.size(), src_offset, len)?;
        // SAFETY: the source range is inside its host buffer (checked).
        let bytes = unsafe { std::slice::from_raw_parts(base.add(src_offset), len) };
        self.write(dst_offset, bytes)?;
        Ok(true)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
