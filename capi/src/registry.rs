//! The registry of platforms and devices, and starting backends on them.

use std::ffi::c_char;
use std::sync::{Arc, LazyLock};

use gantry::engine::{DeviceId, DeviceType, Registry, platform_extension};
use gantry::{Backend, RegistryDefaults, SetAbortCallback, SetThreadCount};

use crate::backend::{BACKENDS, BackendEntry, GantryBackend};
use crate::entry::{Failure, entry};
use crate::handles::{Table, lock};
use crate::ptr::{read_str, slice_mut, write_out, write_string};
use crate::status::GantryStatus;

/// A registry: the platforms compiled in and the devices they found.
///
/// A zero-initialized value (`{0}`) is the null handle.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GantryRegistry {
    /// The handle's number (0 = null). Opaque: only copy or compare it.
    pub id: u64,
}

pub(crate) static REGISTRIES: LazyLock<Table<Registry>> = LazyLock::new(|| Table::new("registry", 0x5247));

/// What kind of device a device is.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GantryDeviceType {
    /// The host CPU.
    GantryDeviceCpu = 0,
    /// A discrete GPU.
    GantryDeviceGpu = 1,
    /// An integrated GPU (memory shared with the host).
    GantryDeviceIgpu = 2,
    /// Another accelerator.
    GantryDeviceAccel = 3,
}

/// One device's facts, as `gantry_registry_device` reports them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GantryDeviceInfo {
    /// The kind of device.
    pub device_type: GantryDeviceType,
    /// Free memory in bytes (as the driver reports it).
    pub memory_free: u64,
    /// Total memory in bytes.
    pub memory_total: u64,
    /// Whether it is a software implementation (lavapipe, WARP): never chosen by default.
    pub is_software: bool,
}

/// A registry with every platform compiled in and found on this machine (the
/// CPU always).
///
/// Threading: any thread. A registry may be shared between threads; calls on
/// it are serialized.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_registry_new(out: *mut GantryRegistry) -> GantryStatus {
    entry("gantry_registry_new", || {
        let registry = Registry::with_defaults()?;
        // SAFETY: the caller's contract.
        unsafe { write_out(out, GantryRegistry { id: REGISTRIES.insert(registry) }, "out") }
    })
}

/// Frees a registry. Backends started from it stay valid.
///
/// Threading: any thread; waits for calls in flight on it.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_registry_free(registry: GantryRegistry) -> GantryStatus {
    entry("gantry_registry_free", || REGISTRIES.remove(registry.id).map(drop))
}

/// How many devices the registry holds (indices `0..count` for
/// `gantry_registry_device`).
///
/// Threading: any thread.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `count` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_registry_device_count(registry: GantryRegistry, count: *mut usize) -> GantryStatus {
    entry("gantry_registry_device_count", || {
        let registry = REGISTRIES.get(registry.id)?;
        let n = lock(&registry, "registry")?.device_count();
        // SAFETY: the caller's contract.
        unsafe { write_out(count, n, "count") }
    })
}

fn device_at(registry: &Registry, index: usize) -> Result<DeviceId, Failure> {
    registry.devices().nth(index).map(|(id, _)| id).ok_or_else(|| {
        Failure::new(
            GantryStatus::GantryErrorNotFound,
            format!("device index {index} (the registry has {})", registry.device_count()),
        )
    })
}

/// Device `index`'s name (`"CPU"`, `"wgpu0"`, `"cuda0"`: what
/// `gantry_registry_backend` takes) into `name` (`cap` bytes, NUL-terminated;
/// its length to `len` when not null) and its facts into `info` (when not null).
/// A buffer too small gets `GANTRY_ERROR_BUFFER_TOO_SMALL` with the length written.
///
/// Threading: any thread.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `name` is null or valid for `cap` bytes; `len` and `info` are null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_registry_device(
    registry: GantryRegistry,
    index: usize,
    name: *mut c_char,
    cap: usize,
    len: *mut usize,
    info: *mut GantryDeviceInfo,
) -> GantryStatus {
    entry("gantry_registry_device", || {
        let registry = REGISTRIES.get(registry.id)?;
        let registry = lock(&registry, "registry")?;
        let device = registry.device(device_at(&registry, index)?)?;
        if !info.is_null() {
            let memory = device.memory();
            let facts = GantryDeviceInfo {
                device_type: match device.device_type() {
                    DeviceType::Cpu => GantryDeviceType::GantryDeviceCpu,
                    DeviceType::Gpu => GantryDeviceType::GantryDeviceGpu,
                    DeviceType::IGpu => GantryDeviceType::GantryDeviceIgpu,
                    DeviceType::Accel => GantryDeviceType::GantryDeviceAccel,
                },
                memory_free: memory.free as u64,
                memory_total: memory.total as u64,
                is_software: device.is_software(),
            };
            // SAFETY: the caller's contract.
            unsafe { write_out(info, facts, "info")? };
        }
        // SAFETY: the caller's contract.
        unsafe { write_string(name, cap, len, device.name()) }
    })
}

/// Starts a backend on `registry`'s device `id`, keeping the platform's
/// extensions with it.
pub(crate) fn start_backend(registry: &Registry, id: DeviceId) -> Result<BackendEntry, Failure> {
    let backend: Arc<dyn Backend> = registry.device(id)?.init_backend(None)?;
    let platform = registry.platform_of(id)?;
    Ok(BackendEntry {
        backend,
        set_abort: platform_extension::<SetAbortCallback>(platform.as_ref()).copied(),
        set_threads: platform_extension::<SetThreadCount>(platform.as_ref()).copied(),
    })
}

/// Starts a backend (a stream) on the device named `name` (case-insensitive).
///
/// Threading: any thread. The backend is a separate handle: free it with
/// `gantry_backend_free`.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `name` is null or a NUL-terminated string; `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_registry_backend(
    registry: GantryRegistry,
    name: *const c_char,
    out: *mut GantryBackend,
) -> GantryStatus {
    entry("gantry_registry_backend", || {
        // SAFETY: the caller's contract.
        let name = unsafe { read_str(name, "name")? };
        if out.is_null() {
            return Err(Failure::invalid("out is a null pointer"));
        }
        let registry = REGISTRIES.get(registry.id)?;
        let registry = lock(&registry, "registry")?;
        let id = registry.find_device(name).ok_or_else(|| {
            let known: Vec<&str> = registry.devices().map(|(_, d)| d.name()).collect();
            Failure::new(GantryStatus::GantryErrorNotFound, format!("device {name:?} (devices: {})", known.join(", ")))
        })?;
        let backend = start_backend(&registry, id)?;
        // SAFETY: the caller's contract.
        unsafe { write_out(out, GantryBackend { id: BACKENDS.insert(backend) }, "out") }
    })
}

/// A backend on every device in scheduler priority order (GPUs first, the
/// CPU last; software GPUs left out): up to `cap` handles into `out`, their
/// number to `n_out`. When `cap` is too small nothing is started, the number
/// needed goes to `n_out` and the call fails with `GANTRY_ERROR_BUFFER_TOO_SMALL`.
///
/// Threading: any thread.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `out` is null or valid for `cap` writes; `n_out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_registry_backends_by_priority(
    registry: GantryRegistry,
    out: *mut GantryBackend,
    cap: usize,
    n_out: *mut usize,
) -> GantryStatus {
    entry("gantry_registry_backends_by_priority", || {
        let registry = REGISTRIES.get(registry.id)?;
        let registry = lock(&registry, "registry")?;
        let ids = registry.devices_by_priority();
        // SAFETY: the caller's contract.
        unsafe { write_out(n_out, ids.len(), "n_out")? };
        if cap < ids.len() {
            return Err(Failure::new(
                GantryStatus::GantryErrorBufferTooSmall,
                format!("{} backends, room for {cap}", ids.len()),
            ));
        }
        // SAFETY: the caller's contract.
        let out = unsafe { slice_mut(out, ids.len(), "out")? };
        let started: Vec<BackendEntry> =
            ids.iter().map(|&id| start_backend(&registry, id)).collect::<Result<_, _>>()?;
        for (slot, backend) in out.iter_mut().zip(started) {
            *slot = GantryBackend { id: BACKENDS.insert(backend) };
        }
        Ok(())
    })
}
