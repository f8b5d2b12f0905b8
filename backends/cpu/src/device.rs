//! The CPU device.

use std::any::{Any, TypeId};
use std::sync::{Arc, OnceLock};

use gantry_engine::{
    Backend, Buffer, BufferType, Context, Device, DeviceCaps, DeviceType, Error, EventId, EventTable, HostMemory,
    MemoryInfo, Result, TensorId,
};

use super::buffer::HostMemoryBuffer;
use super::{CpuBackend, sysinfo};

struct DeviceInner {
    description: String,
    events: EventTable,
}

/// The host CPU as a device: name `"CPU"`, the model name from the OS as its
/// description. Clones share one event table.
///
/// Environment: `GANTRY_CPU_ISA` ([`crate::ISA_CAP_ENV`]) caps the kernel
/// path of the whole process. It is read once, by the first backend made
/// ([`CpuBackend::with_device`], which fails for a value that names no
/// path) or the first kernel run, whichever comes first: the kernels of
/// every CPU backend dispatch on it, so it is a setting of the process, not
/// of one device.
#[derive(Clone)]
pub struct CpuDevice {
    inner: Arc<DeviceInner>,
}

impl CpuDevice {
    /// The CPU, described from the OS.
    pub fn new() -> Self {
        Self { inner: Arc::new(DeviceInner { description: sysinfo::cpu_model_name(), events: EventTable::default() }) }
    }

    /// A CPU backend on this device with `n_threads` threads.
    pub fn backend(&self, n_threads: usize) -> Result<CpuBackend> {
        CpuBackend::with_device(self.clone(), n_threads)
    }

    /// The device's events.
    pub(crate) fn events(&self) -> &EventTable {
        &self.inner.events
    }
}

/// The CPU device the CPU buffer types name as their device (one per
/// process; every [`CpuDevice`] is the same host CPU, named `"CPU"`).
pub(crate) fn shared_device() -> Arc<dyn Device> {
    static DEVICE: OnceLock<Arc<dyn Device>> = OnceLock::new();
    DEVICE.get_or_init(|| Arc::new(CpuDevice::new())).clone()
}

impl Default for CpuDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuDevice").field("description", &self.inner.description).finish()
    }
}

/// Parses `init_backend`'s parameters: none, or `threads=N`.
fn parse_threads(params: Option<&str>) -> Result<usize> {
    let default = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Some(params) = params.map(str::trim).filter(|p| !p.is_empty()) else {
        return Ok(default);
    };
    params.strip_prefix("threads=").and_then(|n| n.trim().parse::<usize>().ok()).filter(|&n| n > 0).ok_or_else(|| {
        Error::Unsupported(format!("CPU backend parameters {params:?}: expected \"threads=N\" with N > 0"))
    })
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        "CPU"
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    fn memory(&self) -> MemoryInfo {
        sysinfo::memory()
    }

    fn device_type(&self) -> DeviceType {
        DeviceType::Cpu
    }

    fn caps(&self) -> DeviceCaps {
        DeviceCaps { async_compute: false, host_buffer: false, buffer_from_host_ptr: true, events: true }
    }

    fn init_backend(&self, params: Option<&str>) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(self.backend(parse_threads(params)?)?))
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        super::buffer_type()
    }

    fn buffer_from_host_memory(&self, memory: HostMemory, max_tensor_size: usize) -> Result<Box<dyn Buffer>> {
        let _ = max_tensor_size; // host memory has no per-tensor limit
        Ok(Box::new(HostMemoryBuffer::new(memory)))
    }

    fn host_memory_buffer_type(&self) -> Arc<dyn BufferType> {
        super::mapped_buffer_type()
    }

    fn supports_op(&self, ctx: &Context, tensor: TensorId) -> bool {
        super::supports_op(ctx, tensor)
    }

    fn supports_buft(&self, buft: &dyn BufferType) -> bool {
        // Host memory, and the CPU's own repacked weights (which are not host
        // memory to anyone else).
        buft.is_host() || buft.as_any().is::<super::RepackBufferType>()
    }

    fn event_new(&self) -> Result<EventId> {
        Ok(self.inner.events.create())
    }

    fn event_free(&self, event: EventId) -> Result<()> {
        self.inner.events.free(event)
    }

    fn event_synchronize(&self, event: EventId) -> Result<()> {
        self.inner.events.wait(event)
    }

    /// The CPU platform's extensions (thread count, abort callback,
    /// repacked weight layout).
    fn extension(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        super::platform::cpu_extension(type_id)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_parameters() {
        assert!(parse_threads(None).unwrap() >= 1);
        assert_eq!(parse_threads(Some("threads=3")).unwrap(), 3);
        for bad in ["threads=0", "threads=x", "fast=1"] {
            let err = parse_threads(Some(bad)).unwrap_err().to_string();
            assert!(err.contains("threads=N"), "{err}");
        }
    }
}
