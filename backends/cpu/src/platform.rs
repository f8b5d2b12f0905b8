//! The CPU platform: one device, and the typed extensions that set a CPU
//! backend's thread count and abort callback and name its repacked weight
//! layout (offered by the platform and, for callers that hold only a
//! backend or a device, by its device).

use std::any::{Any, TypeId};
use std::sync::Arc;

use gantry_engine::{
    AbortCallback, Backend, Device, Error, Platform, Result, SetAbortCallback, SetThreadCount, WeightRepack,
};

use super::{CpuBackend, CpuDevice};

/// The CPU backend family (`"CPU"`) with its single device.
pub struct CpuPlatform {
    device: CpuDevice,
}

/// The CPU's thread-count extension.
static SET_THREAD_COUNT: SetThreadCount = SetThreadCount(set_thread_count);
/// The CPU's abort-callback extension.
static SET_ABORT_CALLBACK: SetAbortCallback = SetAbortCallback(set_abort_callback);
/// The CPU's repacked weight layout (`CPU_REPACK`).
static WEIGHT_REPACK: WeightRepack =
    WeightRepack { repacks: super::repacks_layout, buffer_type: super::repack_buffer_type };

/// The CPU platform's extension of type `type_id`, if it has one (for the
/// platform and for its device alike).
pub(crate) fn cpu_extension(type_id: TypeId) -> Option<&'static (dyn Any + Send + Sync)> {
    if type_id == TypeId::of::<SetThreadCount>() {
        Some(&SET_THREAD_COUNT)
    } else if type_id == TypeId::of::<SetAbortCallback>() {
        Some(&SET_ABORT_CALLBACK)
    } else if type_id == TypeId::of::<WeightRepack>() {
        Some(&WEIGHT_REPACK)
    } else {
        None
    }
}

impl CpuPlatform {
    /// The platform with the host CPU as its device.
    pub fn new() -> Self {
        Self { device: CpuDevice::new() }
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
        cpu_extension(type_id)
    }
}
