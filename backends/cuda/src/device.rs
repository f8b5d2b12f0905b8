//! The CUDA device: one GPU, its buffer types, what it supports, when it
//! wants host-resident work, and its events.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use gantry_arenas::{EventId, TensorId};
use gantry_engine::{
    Backend, Buffer, BufferType, Context, Device, DeviceCaps, DeviceType, Error, HostMemory, MemoryInfo, Result,
};

use super::backend::CudaBackend;
use super::buffer::CudaBufferType;
use super::gpu::Gpu;
use super::host_buffer::{CudaHostBufferType, CudaMappedBufferType};
use super::ops::Planner;

/// Batch size (columns of a product) from which host-resident weights are
/// worth moving to the GPU (ggml's rule for GPUs).
pub const DEFAULT_OFFLOAD_MIN_BATCH: usize = 32;

pub(crate) struct DeviceInner {
    gpu: Arc<Gpu>,
    description: String,
    buffer_type: Arc<CudaBufferType>,
    host_type: Arc<CudaHostBufferType>,
    mapped_type: Arc<CudaMappedBufferType>,
    offload_min_batch: AtomicUsize,
}

/// A buffer type's way back to its device (weak: the device owns the type).
pub(crate) struct DeviceLink(Weak<DeviceInner>);

impl DeviceLink {
    /// The device, while it lives.
    pub fn device(&self) -> Option<Arc<dyn Device>> {
        self.0.upgrade().map(|inner| Arc::new(CudaDevice { inner }) as Arc<dyn Device>)
    }
}

/// An NVIDIA GPU (`cuda0`, `cuda1`, ...). Cheap to clone; clones share the
/// device, its compiled kernels and its events.
#[derive(Clone)]
pub struct CudaDevice {
    inner: Arc<DeviceInner>,
}

impl CudaDevice {
    pub(crate) fn new(gpu: Gpu) -> Self {
        let gpu = Arc::new(gpu);
        let f = &gpu.facts;
        let description =
            format!("{} ({}, {} SMs; {})", f.model, f.arch, f.multiprocessors, super::libraries::versions());
        let inner = Arc::new_cyclic(|link: &Weak<DeviceInner>| DeviceInner {
            buffer_type: Arc::new(CudaBufferType::new(gpu.clone(), DeviceLink(link.clone()))),
            host_type: Arc::new(CudaHostBufferType::new(gpu.clone(), DeviceLink(link.clone()))),
            mapped_type: Arc::new(CudaMappedBufferType::new(gpu.clone(), DeviceLink(link.clone()))),
            description,
            offload_min_batch: AtomicUsize::new(DEFAULT_OFFLOAD_MIN_BATCH),
            gpu,
        });
        Self { inner }
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.inner.gpu
    }

    /// The batch size from which `offload_op` moves host-resident work here.
    pub fn offload_min_batch(&self) -> usize {
        self.inner.offload_min_batch.load(Ordering::Relaxed)
    }

    /// Sets the batch size from which `offload_op` moves host-resident work
    /// here (default [`DEFAULT_OFFLOAD_MIN_BATCH`]; `usize::MAX` never offloads).
    pub fn set_offload_min_batch(&self, batch: usize) {
        self.inner.offload_min_batch.store(batch, Ordering::Relaxed);
    }

    /// Why `tensor` cannot run here, or `None` when it can.
    pub fn unsupported_reason(&self, ctx: &Context, tensor: TensorId) -> Option<String> {
        Planner::check_only(ctx, self.inner.gpu.facts.max_grid_yz).plan(tensor).err()
    }

    /// Modules compiled and loaded so far.
    pub fn loaded_modules(&self) -> usize {
        self.inner.gpu.loaded_modules()
    }
}

impl Device for CudaDevice {
    fn name(&self) -> &str {
        &self.inner.gpu.name
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    /// Free memory as the driver reports it (`cuMemGetInfo`: other programs' use counts).
    fn memory(&self) -> MemoryInfo {
        let total = self.inner.gpu.facts.total_memory;
        match self.inner.gpu.memory() {
            Ok((free, total)) => MemoryInfo { free, total },
            Err(_) => MemoryInfo { free: 0, total },
        }
    }

    fn device_type(&self) -> DeviceType {
        DeviceType::Gpu
    }

    fn caps(&self) -> DeviceCaps {
        DeviceCaps { async_compute: true, host_buffer: true, buffer_from_host_ptr: true, events: true }
    }

    fn init_backend(&self, params: Option<&str>) -> Result<Arc<dyn Backend>> {
        if let Some(p) = params.map(str::trim).filter(|p| !p.is_empty()) {
            return Err(Error::Unsupported(format!(
                "{}: the CUDA backend takes no parameters (got {p:?})",
                self.name()
            )));
        }
        Ok(Arc::new(CudaBackend::new(self.clone())?))
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.inner.buffer_type.clone()
    }

    fn host_buffer_type(&self) -> Option<Arc<dyn BufferType>> {
        Some(self.inner.host_type.clone())
    }

    fn buffer_from_host_memory(&self, memory: HostMemory, max_tensor_size: usize) -> Result<Box<dyn Buffer>> {
        let _ = max_tensor_size; // host memory has no per-tensor limit
        Ok(Box::new(self.inner.mapped_type.register(memory)?))
    }

    fn host_memory_buffer_type(&self) -> Arc<dyn BufferType> {
        self.inner.mapped_type.clone()
    }

    fn supports_op(&self, ctx: &Context, tensor: TensorId) -> bool {
        self.unsupported_reason(ctx, tensor).is_none()
    }

    fn supports_buft(&self, buft: &dyn BufferType) -> bool {
        buft.as_any().downcast_ref::<CudaBufferType>().is_some_and(|b| Arc::ptr_eq(b.gpu(), &self.inner.gpu))
    }

    /// Worth moving host-resident weights here for batches of
    /// [`CudaDevice::offload_min_batch`] columns and more, except row gathers.
    fn offload_op(&self, ctx: &Context, tensor: TensorId) -> bool {
        let Some(d) = ctx.get(tensor) else { return false };
        d.offload_batch() >= self.offload_min_batch() && self.supports_op(ctx, tensor)
    }

    fn event_new(&self) -> Result<EventId> {
        let event = self.inner.gpu.new_event()?;
        let id = self.inner.gpu.events.create();
        if !self.inner.gpu.events.record(id, Arc::new(event)) {
            return Err(Error::StaleHandle { kind: "event", handle: format!("{id:?} ({})", self.name()) });
        }
        Ok(id)
    }

    fn event_free(&self, event: EventId) -> Result<()> {
        if self.inner.gpu.events.free(event) {
            Ok(())
        } else {
            Err(Error::StaleHandle { kind: "event", handle: format!("{event:?} ({})", self.name()) })
        }
    }

    fn event_synchronize(&self, event: EventId) -> Result<()> {
        let ev = self.inner.gpu.event(event)?;
        self.inner.gpu.context()?;
        ev.synchronize().map_err(|e| self.inner.gpu.error("cuEventSynchronize", e))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
