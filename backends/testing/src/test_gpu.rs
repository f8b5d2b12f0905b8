//! A test platform: a "GPU" that computes with the CPU kernels but keeps its
//! tensors in its own, non-host buffer type, with its own set of supported
//! ops. Placement, copies, pipelining with events and re-planning then run
//! for real on machines without a GPU, and every node it computes is checked
//! to read only memory it can access.

use gantry_engine::sync::atomic::{AtomicUsize, Ordering};
use std::any::Any;
use std::sync::Arc;

use gantry_engine::testing::TestBufferType;
use gantry_engine::{
    Backend, BackendErrorKind, BufferType, ComputeStatus, Context, Device, DeviceCaps, DeviceType, Error, EventId,
    Graph, MemoryInfo, Result, TensorDesc, TensorId, same_buffer_type,
};

use gantry_cpu::{self as cpu, CpuBackend, EventTable};

/// Which ops the test GPU computes.
pub type SupportFn = Arc<dyn Fn(&TensorDesc) -> bool + Send + Sync>;

/// The test GPU device.
#[derive(Clone)]
pub struct TestGpuDevice {
    name: String,
    device_type: DeviceType,
    buft: Arc<dyn BufferType>,
    supports: SupportFn,
    events: Arc<EventTable>,
    /// Nodes computed by this device's backends (to check placement really happened).
    pub computed: Arc<AtomicUsize>,
    /// Batches (`TensorDesc::offload_batch`) from which it asks for ops on
    /// host weights (`Device::offload_op`); `None` never asks.
    offload_min_batch: Option<usize>,
}

impl TestGpuDevice {
    /// A device named `name` supporting the ops `supports` accepts.
    pub fn new(name: &str, supports: SupportFn) -> Self {
        // Host memory underneath (so the CPU kernels can run on it), but not
        // host memory to anyone asking: the CPU backend refuses it, and
        // copies to and from it are staged through the host.
        let memory = TestBufferType::device(name, 256).with_host_ptr().shared();
        Self::with_buffer_type(name, supports, memory, DeviceType::Gpu)
    }

    /// A device over an existing buffer type (e.g. the CPU's, for a
    /// "BLAS-like" accelerator sharing host memory).
    pub fn with_buffer_type(
        name: &str,
        supports: SupportFn,
        buft: Arc<dyn BufferType>,
        device_type: DeviceType,
    ) -> Self {
        Self {
            name: name.to_owned(),
            device_type,
            buft,
            supports,
            events: Arc::new(EventTable::default()),
            computed: Arc::new(AtomicUsize::new(0)),
            offload_min_batch: None,
        }
    }

    /// The device asking for ops on host weights from batches of `min_batch`
    /// tokens on, as a real GPU does (op offload).
    pub fn with_offload(mut self, min_batch: usize) -> Self {
        self.offload_min_batch = Some(min_batch);
        self
    }

    /// A backend on this device.
    pub fn backend(&self) -> Arc<dyn Backend> {
        self.init_backend(None).unwrap()
    }
}

impl Device for TestGpuDevice {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "test GPU (CPU kernels over private memory)"
    }
    fn memory(&self) -> MemoryInfo {
        MemoryInfo { free: 1 << 30, total: 1 << 30 }
    }
    fn device_type(&self) -> DeviceType {
        self.device_type
    }
    fn caps(&self) -> DeviceCaps {
        DeviceCaps { async_compute: false, host_buffer: false, buffer_from_host_ptr: false, events: true }
    }
    fn init_backend(&self, _: Option<&str>) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(TestGpuBackend { device: self.clone(), cpu: CpuBackend::with_threads(1)? }))
    }
    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.buft.clone()
    }
    fn supports_op(&self, ctx: &Context, t: TensorId) -> bool {
        ctx.get(t).is_some_and(|d| (self.supports)(d)) && cpu::supports_op(ctx, t)
    }
    fn offload_op(&self, ctx: &Context, t: TensorId) -> bool {
        let wants = |d: &TensorDesc| self.offload_min_batch.is_some_and(|min| d.offload_batch() >= min);
        ctx.get(t).is_some_and(wants) && self.supports_op(ctx, t)
    }
    fn supports_buft(&self, buft: &dyn BufferType) -> bool {
        std::ptr::addr_eq(buft as *const dyn BufferType, Arc::as_ptr(&self.buft))
    }
    fn event_new(&self) -> Result<EventId> {
        Ok(self.events.create())
    }
    fn event_free(&self, event: EventId) -> Result<()> {
        self.events.free(event)
    }
    fn event_synchronize(&self, event: EventId) -> Result<()> {
        self.events.wait(event)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The test GPU's stream.
pub struct TestGpuBackend {
    device: TestGpuDevice,
    cpu: CpuBackend,
}

impl TestGpuBackend {
    fn check_readable(&self, ctx: &Context, node: TensorId) -> Result<()> {
        let d = ctx.desc(node)?;
        for t in d.sources().chain(std::iter::once(node)) {
            let (entry, _) = ctx.tensor_buffer(t)?;
            if !same_buffer_type(&entry.buffer_type, &self.device.buft) {
                let reason =
                    format!("{} of {} is in {} memory", ctx.describe(t), ctx.describe(node), entry.buffer_type.name());
                return Err(Error::backend(&self.device.name, BackendErrorKind::Unsupported, reason));
            }
        }
        Ok(())
    }
}

impl Backend for TestGpuBackend {
    fn name(&self) -> &str {
        &self.device.name
    }
    fn device(&self) -> &dyn Device {
        &self.device
    }
    fn graph_compute(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        for &n in graph.nodes() {
            let Ok(d) = ctx.desc(n) else { continue };
            if d.op.is_empty() {
                continue;
            }
            if !self.device.supports_op(ctx, n) {
                return ComputeStatus::Failed(Error::Unsupported(format!("{} on {}", d.op.name(), self.device.name)));
            }
            if let Err(e) = self.check_readable(ctx, n) {
                return ComputeStatus::Failed(e);
            }
            self.device.computed.fetch_add(1, Ordering::Relaxed);
        }
        self.cpu.compute_graph(ctx, graph)
    }
    fn event_record(&self, event: EventId) -> Result<()> {
        self.device.events.record(event)
    }
    fn event_wait(&self, event: EventId) -> Result<()> {
        self.device.events.wait(event)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
