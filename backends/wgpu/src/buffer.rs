//! The wgpu buffer type and buffers: device storage buffers that hold tensors.

use std::any::Any;
use std::sync::Arc;

use gantry_engine::{Buffer, BufferType, Device, ReadStaging, Result};

use super::device::DeviceLink;
use super::gpu::{Gpu, GpuBuffer};

/// Storage buffers of one GPU. Tensor offsets are aligned to at least the
/// adapter's `min_storage_buffer_offset_alignment`; a buffer is at most the
/// largest storage binding (and 4 GiB, as kernels index bytes with `u32`),
/// so every buffer can be bound whole and larger requests are an `Err`.
pub struct WgpuBufferType {
    gpu: Arc<Gpu>,
    device: DeviceLink,
}

impl WgpuBufferType {
    pub(crate) fn new(gpu: &Arc<Gpu>, device: DeviceLink) -> Self {
        Self { gpu: gpu.clone(), device }
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}

impl BufferType for WgpuBufferType {
    fn name(&self) -> &str {
        &self.gpu.name
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        if size > self.max_size() {
            return Err(gantry_engine::Error::OutOfMemory {
                buffer_type: format!("{} (largest buffer {} bytes)", self.gpu.name, self.max_size()),
                size,
            });
        }
        let mem = GpuBuffer::new(&self.gpu, size as u64, "gantry tensors")?;
        Ok(Box::new(WgpuBuffer { mem, size }))
    }

    fn alignment(&self) -> usize {
        (self.gpu.facts.limits.min_storage_buffer_offset_alignment as usize).max(16).next_power_of_two()
    }

    fn max_size(&self) -> usize {
        let l = &self.gpu.facts.limits;
        let bytes = l.max_storage_buffer_binding_size.min(l.max_buffer_size).min(u64::from(u32::MAX));
        let align = self.alignment() as u64;
        usize::try_from(bytes / align * align).unwrap_or(usize::MAX)
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

/// A buffer of [`WgpuBufferType`]: one storage buffer on the GPU.
pub struct WgpuBuffer {
    mem: GpuBuffer,
    size: usize,
}

impl WgpuBuffer {
    pub(crate) fn mem(&self) -> &GpuBuffer {
        &self.mem
    }
}

impl Buffer for WgpuBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        None
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        gantry_engine::check_range(&self.mem.gpu().name, self.size, offset, data.len())?;
        self.mem.write(offset as u64, data)
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        gantry_engine::check_range(&self.mem.gpu().name, self.size, offset, out.len())?;
        self.mem.read(offset as u64, out)
    }

    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        gantry_engine::check_range(&self.mem.gpu().name, self.size, offset, len)?;
        self.mem.fill(offset as u64, len as u64, value)
    }

    fn copy_from(&self, dst_offset: usize, src: &dyn Buffer, src_offset: usize, len: usize) -> Result<bool> {
        let Some(src) = src.as_any().downcast_ref::<WgpuBuffer>() else { return Ok(false) };
        gantry_engine::check_range(&self.mem.gpu().name, self.size, dst_offset, len)?;
        gantry_engine::check_range(&src.mem.gpu().name, src.size, src_offset, len)?;
        self.mem.copy_from(dst_offset as u64, &src.mem, src_offset as u64, len as u64)
    }

    /// Staged through a mappable buffer kept in `staging` (see `read_back`).
    fn begin_read(&self, offset: usize, len: usize, staging: &mut ReadStaging) -> Result<bool> {
        super::read_back::begin_read(self, offset, len, staging)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
