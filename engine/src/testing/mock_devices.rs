//! Devices that place but do not compute: for testing and benchmarking the
//! scheduler's placement systems without any kernels.

use std::any::Any;
use std::sync::Arc;

use gantry_arenas::{EventId, TensorId};

use super::TestBufferType;
use crate::{
    Backend, BufferType, ComputeStatus, Context, Device, DeviceCaps, DeviceType, Graph, MemoryInfo, Op, Result,
};

/// A device that supports the ops `supports` accepts and the buffer type `buft`.
#[derive(Clone)]
pub struct MockDevice {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub device_type: DeviceType,
    /// Its buffer type.
    pub buft: Arc<dyn BufferType>,
    /// Which ops it runs.
    pub supports: fn(&Op) -> bool,
    /// Reads host buffers directly (like the CPU, or a BLAS backend).
    pub reads_host: bool,
    /// What `offload_op` answers.
    pub offload: bool,
}

impl Device for MockDevice {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "mock"
    }
    fn memory(&self) -> MemoryInfo {
        MemoryInfo::default()
    }
    fn device_type(&self) -> DeviceType {
        self.device_type
    }
    fn caps(&self) -> DeviceCaps {
        DeviceCaps::default()
    }
    fn init_backend(&self, _: Option<&str>) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(MockBackend { device: self.clone() }))
    }
    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.buft.clone()
    }
    fn supports_op(&self, ctx: &Context, t: TensorId) -> bool {
        ctx.get(t).is_some_and(|d| (self.supports)(&d.op))
    }
    fn supports_buft(&self, buft: &dyn BufferType) -> bool {
        std::ptr::addr_eq(buft as *const dyn BufferType, Arc::as_ptr(&self.buft)) || (self.reads_host && buft.is_host())
    }
    fn offload_op(&self, _: &Context, _: TensorId) -> bool {
        self.offload
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A stream of [`MockDevice`]: computes nothing.
pub struct MockBackend {
    /// Its device.
    pub device: MockDevice,
}

impl Backend for MockBackend {
    fn name(&self) -> &str {
        self.device.name
    }
    fn device(&self) -> &dyn Device {
        &self.device
    }
    fn graph_compute(&self, _: &Context, _: Graph<'_>) -> ComputeStatus {
        ComputeStatus::Success
    }
    fn event_record(&self, _: EventId) -> Result<()> {
        Ok(())
    }
    fn event_wait(&self, _: EventId) -> Result<()> {
        Ok(())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Supports every op.
pub fn all_ops(_: &Op) -> bool {
    true
}

/// A CPU-typed mock over host memory.
pub fn cpu() -> Arc<dyn Backend> {
    let buft = TestBufferType::host("CPU", 32).shared();
    MockDevice { name: "CPU", device_type: DeviceType::Cpu, buft, supports: all_ops, reads_host: true, offload: false }
        .init_backend(None)
        .unwrap()
}

/// A GPU-typed mock with its own non-host buffer type.
pub fn gpu(name: &'static str, supports: fn(&Op) -> bool) -> Arc<dyn Backend> {
    gpu_with(name, supports, TestBufferType::device(name, 32).shared())
}

/// A GPU-typed mock over `buft` (e.g. virtual memory, for large graphs that
/// need no memory).
pub fn gpu_with(name: &'static str, supports: fn(&Op) -> bool, buft: Arc<dyn BufferType>) -> Arc<dyn Backend> {
    MockDevice { name, device_type: DeviceType::Gpu, buft, supports, reads_host: false, offload: false }
        .init_backend(None)
        .unwrap()
}
