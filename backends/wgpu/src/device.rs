//! The wgpu device: one adapter, its buffer type, its kernels, and what it supports.

use std::any::Any;
use std::sync::{Arc, Weak};

use gantry_arenas::{EventId, TensorId};
use gantry_engine::{Backend, BufferType, Context, Device, DeviceCaps, DeviceType, Error, MemoryInfo, Result};

use super::backend::WgpuBackend;
use super::buffer::WgpuBuffer;
use super::buffer::WgpuBufferType;
use super::gpu::{AdapterFacts, AdapterKind, Gpu, GpuOwner, Submission, TensorStorage};
use super::kernels::{self, Caps, Kernels};
use gantry_engine::device_state::QueueEvents;

pub(crate) struct DeviceInner {
    gpu: Arc<Gpu>,
    description: String,
    buffer_type: Arc<WgpuBufferType>,
    kernels: Kernels,
    caps: Caps,
    /// Events: the queue point each was last recorded at (`None`: never
    /// recorded, so waiting returns at once). The device has one in-order
    /// queue, so an event is complete once the queue has passed its point.
    events: QueueEvents<Submission>,
}

/// A GPU reached through wgpu (Vulkan, Metal, DX12 or GL). Cheap to clone;
/// clones share the device, its buffers' memory and its compiled kernels.
#[derive(Clone)]
pub struct WgpuDevice {
    inner: Arc<DeviceInner>,
}

/// A buffer type's way back to its device (weak: the device owns the type).
pub(crate) struct DeviceLink(Weak<DeviceInner>);

impl DeviceLink {
    /// The device, while it lives.
    pub fn device(&self) -> Option<Arc<dyn Device>> {
        self.0.upgrade().map(|inner| Arc::new(WgpuDevice { inner }) as Arc<dyn Device>)
    }
}

/// The scheduler's device type for an adapter kind.
///
/// Software adapters (lavapipe, WARP) are `IGpu`: they compute in host
/// memory like an integrated GPU, so the scheduler may use them (CI tests
/// the backend on lavapipe) but ranks any real discrete GPU first.
pub fn device_type_of(kind: AdapterKind) -> DeviceType {
    match kind {
        AdapterKind::Discrete | AdapterKind::Virtual => DeviceType::Gpu,
        AdapterKind::Integrated | AdapterKind::Cpu | AdapterKind::Other => DeviceType::IGpu,
    }
}

impl WgpuDevice {
    pub(crate) fn new(gpu: Arc<Gpu>) -> Self {
        let f = &gpu.facts;
        let software = if f.kind == AdapterKind::Cpu { ", software" } else { "" };
        let host = if gpu.owner == GpuOwner::Host { ", the host's device" } else { "" };
        let description = format!("{} ({}{software}{host})", f.name, f.api);
        let caps =
            Caps { shader_f16: f.shader_f16, max_groups: f.limits.max_compute_workgroups_per_dimension.min(65535) };
        let inner = Arc::new_cyclic(|link: &Weak<DeviceInner>| DeviceInner {
            buffer_type: Arc::new(WgpuBufferType::new(&gpu, DeviceLink(link.clone()))),
            kernels: Kernels::new(&gpu),
            description,
            caps,
            events: QueueEvents::default(),
            gpu,
        });
        Self { inner }
    }

    /// What the adapter is: name, API, kind, ids, driver, limits, `shader-f16`.
    pub fn facts(&self) -> &AdapterFacts {
        &self.inner.gpu.facts
    }

    /// Bytes Gantry has allocated on this device.
    pub fn allocated_bytes(&self) -> u64 {
        self.inner.gpu.allocated_bytes()
    }

    /// Number of kernels compiled so far (each once per dtype combination).
    pub fn compiled_kernels(&self) -> usize {
        self.inner.kernels.compiled()
    }

    /// Number of bind groups cached: a graph computed again adds none.
    pub fn cached_bind_groups(&self) -> usize {
        self.inner.gpu.cached_bind_groups()
    }

    /// Whether the wgpu device is a host program's own
    /// ([`WgpuPlatform::from_host`](super::WgpuPlatform::from_host)).
    pub fn is_host_device(&self) -> bool {
        self.inner.gpu.owner == GpuOwner::Host
    }

    /// Where `tensor`'s bytes are on this device: the storage buffer, the
    /// byte offset and the size, for a host to bind in its own passes (a
    /// model's output drawn without a copy to the CPU).
    ///
    /// Ordering: Gantry and the host share one in-order queue, so a host
    /// pass submitted after the compute that wrote the tensor was submitted
    /// (after `Scheduler::graph_compute`, or `graph_compute_async` returned)
    /// reads its result, with no wait; a host pass that writes a tensor
    /// Gantry then reads must likewise be submitted before Gantry's
    /// compute. From another thread, order the two submissions yourself.
    /// Mark an output with `Context::set_output` so the allocator keeps its
    /// memory for the whole graph; the range stays the tensor's until its
    /// placement changes (see [`TensorStorage`]).
    ///
    /// `Err`, naming the tensor, when it is stale or not allocated, not in
    /// one of this device's buffers (a CPU tensor, another GPU's), empty,
    /// not contiguous (a permuted or strided view: make a contiguous copy
    /// with `Context::cont`), or starting at an offset a storage binding
    /// cannot take (a view into the middle of a tensor).
    pub fn tensor_storage(&self, ctx: &Context, tensor: TensorId) -> Result<TensorStorage> {
        let desc = ctx.get(tensor).ok_or_else(|| Error::StaleHandle {
            kind: "tensor",
            handle: format!("{tensor:?} (asked for its storage on {})", self.name()),
        })?;
        let refuse = |why: String| {
            Error::Unsupported(format!(
                "{}: no storage to hand over for tensor {}: {why}",
                self.name(),
                ctx.describe(tensor)
            ))
        };
        let (entry, placement) = ctx.tensor_buffer(tensor)?;
        let Some(buffer) = entry.buffer.as_any().downcast_ref::<WgpuBuffer>() else {
            return Err(refuse(format!("it is in {} memory, not in a wgpu storage buffer", entry.buffer_type.name())));
        };
        let gpu = buffer.mem().gpu();
        if !Arc::ptr_eq(gpu, &self.inner.gpu) {
            return Err(refuse(format!("it is on {}", gpu.name)));
        }
        if !desc.is_contiguous() {
            return Err(refuse(format!(
                "it is not contiguous (strides {:?} bytes); copy it into a contiguous tensor with `cont`",
                desc.nb
            )));
        }
        let size = desc.nbytes() as u64;
        if size == 0 {
            return Err(refuse("it is empty, and bindings cannot be".into()));
        }
        let offset = placement.offset as u64;
        let align = u64::from(gpu.facts.limits.min_storage_buffer_offset_alignment.max(1));
        if !offset.is_multiple_of(align) {
            return Err(refuse(format!(
                "it starts at byte {offset} of its buffer, not a multiple of the device's storage offset \
                 alignment ({align} bytes; a view into the middle of a tensor): hand over the tensor it views"
            )));
        }
        Ok(buffer.mem().storage(offset, size))
    }

    /// Why `tensor` cannot run here, or `None` when it can.
    pub fn unsupported_reason(&self, ctx: &Context, tensor: TensorId) -> Option<String> {
        kernels::plan(ctx, tensor, &self.inner.caps).err()
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.inner.gpu
    }

    pub(crate) fn kernels(&self) -> &Kernels {
        &self.inner.kernels
    }

    pub(crate) fn kernel_caps(&self) -> &Caps {
        &self.inner.caps
    }

    fn stale_event(&self, event: EventId) -> Error {
        Error::StaleHandle { kind: "event", handle: format!("{event:?} ({})", self.name()) }
    }

    /// Records `event` at the current end of the queue.
    pub(crate) fn record_event(&self, event: EventId) -> Result<()> {
        let point = self.inner.gpu.mark()?;
        if self.inner.events.record(event, point) { Ok(()) } else { Err(self.stale_event(event)) }
    }

    /// Checks that `event` is one of this device's.
    pub(crate) fn check_event(&self, event: EventId) -> Result<()> {
        if self.inner.events.contains(event) { Ok(()) } else { Err(self.stale_event(event)) }
    }
}

impl Device for WgpuDevice {
    fn name(&self) -> &str {
        &self.inner.gpu.name
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    /// `total` is the device-local memory where the API reports it (Vulkan's
    /// heaps), else the largest buffer the device allows (wgpu reports no
    /// sizes for Metal, DX12 or GL); `free` is `total` minus what Gantry
    /// allocated here, so other programs' use is not counted.
    fn memory(&self) -> MemoryInfo {
        let f = &self.inner.gpu.facts;
        let total = usize::try_from(f.device_memory.unwrap_or(f.limits.max_buffer_size)).unwrap_or(usize::MAX);
        let used = usize::try_from(self.allocated_bytes()).unwrap_or(usize::MAX);
        MemoryInfo { free: total.saturating_sub(used), total }
    }

    fn device_type(&self) -> DeviceType {
        device_type_of(self.inner.gpu.facts.kind)
    }

    fn is_software(&self) -> bool {
        self.facts().kind == AdapterKind::Cpu
    }

    fn caps(&self) -> DeviceCaps {
        DeviceCaps { async_compute: true, host_buffer: false, buffer_from_host_ptr: false, events: true }
    }

    fn init_backend(&self, _params: Option<&str>) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(WgpuBackend::new(self.clone())))
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.inner.buffer_type.clone()
    }

    fn supports_op(&self, ctx: &Context, tensor: TensorId) -> bool {
        kernels::plan(ctx, tensor, &self.inner.caps).is_ok()
    }

    /// Worth moving host-resident weights here for batches of 32 and more
    /// (ggml's rule for GPUs), except row gathers, and never on a software
    /// adapter, which computes on the same CPU more slowly.
    fn offload_op(&self, ctx: &Context, tensor: TensorId) -> bool {
        const MIN_BATCH: usize = 32;
        let Some(d) = ctx.get(tensor) else { return false };
        self.inner.gpu.facts.kind != AdapterKind::Cpu && d.offload_batch() >= MIN_BATCH && self.supports_op(ctx, tensor)
    }

    fn supports_buft(&self, buft: &dyn BufferType) -> bool {
        buft.as_any().downcast_ref::<WgpuBufferType>().is_some_and(|b| Arc::ptr_eq(b.gpu(), &self.inner.gpu))
    }

    fn event_new(&self) -> Result<EventId> {
        Ok(self.inner.events.create())
    }

    fn event_free(&self, event: EventId) -> Result<()> {
        if self.inner.events.free(event) { Ok(()) } else { Err(self.stale_event(event)) }
    }

    fn event_synchronize(&self, event: EventId) -> Result<()> {
        let point = self.inner.events.point(event).ok_or_else(|| self.stale_event(event))?;
        match point {
            Some(point) => self.inner.gpu.wait_until(&point),
            None => Ok(()),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
