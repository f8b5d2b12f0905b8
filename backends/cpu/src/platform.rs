//! The CPU platform: one device, and the typed extensions that set a CPU
//! backend's thread count and abort callback.

use std::any::{Any, TypeId};
use std::sync::Arc;

use gantry_engine::{AbortCallback, Backend, Device, Error, Platform, Result, SetAbortCallback, SetThreadCount};

use super::{CpuBackend, CpuDevice};

/// The CPU backend family (`"CPU"`) with its single device.
pub struct CpuPlatform {
    device: CpuDevice,
    set_thread_count: SetThreadCount,
    set_abort_callback: SetAbortCallback,
}

impl CpuPlatform {
    /// The platform with the host CPU as its device.
    pub fn new() -> Self {
        Self {
            device: CpuDevice::new(),
            set_thread_count: SetThreadCount(set_thread_count),
            set_abort_callback: SetAbortCallback(set_abort_callback),
        }
    }

    /// The CPU device.
    pub fn device(&self) -> &CpuDevice {
        &self.device
    }
}

impl Default for CpuPlatform {
    fn default() -> Self {
        Self::new()
    }
}

fn as_cpu(backend: &dyn Backend) -> Result<&CpuBackend> {
    backend
        .as_any()
        .downcast_ref::<CpuBackend>()
        .ok_or_else(|| Error::Unsupported(format!("backend {} is not a CPU backend", backend.name())))
}

fn set_thread_count(backend: &dyn Backend, n_threads: usize) -> Result<()> {
    as_cpu(backend)?.set_n_threads(n_threads)
}

fn set_abort_callback(backend: &dyn Backend, callback: Option<AbortCallback>) -> Result<()> {
    as_cpu(backend)?.set_abort_callback(callback);
    Ok(())
}

impl Platform for CpuPlatform {
    fn name(&self) -> &str {
        "CPU"
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        vec![Arc::new(self.device.clone())]
    }

    fn extension(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        if type_id == TypeId::of::<SetThreadCount>() {
            Some(&self.set_thread_count)
        } else if type_id == TypeId::of::<SetAbortCallback>() {
            Some(&self.set_abort_callback)
        } else {
            None
        }
    }
}
