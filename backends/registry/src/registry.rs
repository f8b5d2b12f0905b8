//! The default registry: every platform compiled in and found on this machine.

use std::sync::Arc;

use gantry_engine::{Registry, Result};

use crate::cpu::CpuPlatform;

/// A registry with the CPU platform and, when compiled in and present, the
/// GPU platforms, and the servers `GANTRY_REMOTE` names (feature `remote`;
/// a server that cannot be reached is left out with a warning). The CPU is
/// registered first; the scheduler's priority order
/// (`Registry::devices_by_priority`) still puts it last.
pub fn default_registry() -> Result<Registry> {
    #[cfg(feature = "remote")]
    if let Some(config) = crate::remote::RemoteConfig::from_env()? {
        return registry_with_remote(&config);
    }
    local_registry()
}

/// [`default_registry`] with the remote servers of `remote` instead of those
/// of `GANTRY_REMOTE` (the command line's `--remote`).
#[cfg(feature = "remote")]
pub fn registry_with_remote(remote: &crate::remote::RemoteConfig) -> Result<Registry> {
    let mut registry = local_registry()?;
    registry.register_platform(Arc::new(crate::remote::RemotePlatform::connect(remote)?))?;
    Ok(registry)
}

/// The devices of this machine only: the CPU and the GPU platforms compiled
/// in (what `gantry rpc-server` serves from).
pub fn local_registry() -> Result<Registry> {
    let mut registry = Registry::new();
    registry.register_platform(Arc::new(CpuPlatform::new()))?;
    register_gpu_platforms(&mut registry)?;
    Ok(registry)
}

/// Hook for the GPU platforms behind cargo features: the wgpu platform
/// registers here (feature `wgpu`), and CUDA (feature `cuda`). A platform
/// that finds no device registers with none (and, for CUDA, the reason)
/// rather than fail.
fn register_gpu_platforms(registry: &mut Registry) -> Result<()> {
    // One device per GPU wgpu finds (none on a machine without an adapter).
    #[cfg(feature = "wgpu")]
    registry.register_platform(crate::wgpu::platform())?;
    // One device per NVIDIA GPU; none, with the reason, without the driver or its libraries.
    #[cfg(feature = "cuda")]
    registry.register_platform(crate::cuda::platform())?;
    let _ = registry;
    Ok(())
}
