//! Platforms: one backend family and its devices.

use std::any::{Any, TypeId};
use std::sync::Arc;

use crate::{BackendErrorKind, Device};

/// One backend family (ggml's `ggml_backend_reg`): the CPU, wgpu, CUDA.
pub trait Platform: Send + Sync + 'static {
    /// The family's name (`"CPU"`, `"wgpu"`).
    fn name(&self) -> &str;

    /// The devices this platform found.
    fn devices(&self) -> Vec<Arc<dyn Device>>;

    /// Why the platform found no device, when there is a reason worth
    /// telling (a missing driver library), for listings such as `gantry
    /// devices`. `None` when it has devices or nothing to say.
    fn unavailable_reason(&self) -> Option<String> {
        None
    }

    /// What kind of reason [`Platform::unavailable_reason`] is
    /// ([`BackendErrorKind::DriverMissing`] for a missing driver,
    /// [`BackendErrorKind::LibraryMissing`] for a missing library, ...), for a
    /// host to match on. `None` when there is no reason to give.
    fn unavailable_kind(&self) -> Option<BackendErrorKind> {
        None
    }

    /// An optional feature, looked up by its type (see [`platform_extension`]).
    fn extension(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        let _ = type_id;
        None
    }
}

/// The extension of type `E` that `platform` provides, if any.
///
/// ```
/// use std::any::{Any, TypeId};
/// use std::sync::Arc;
/// use gantry_engine::{Device, Platform, SetThreadCount, platform_extension};
/// struct Empty;
/// impl Platform for Empty {
///     fn name(&self) -> &str { "empty" }
///     fn devices(&self) -> Vec<Arc<dyn Device>> { Vec::new() }
/// }
/// assert!(platform_extension::<SetThreadCount>(&Empty).is_none());
/// ```
pub fn platform_extension<E: Any>(platform: &dyn Platform) -> Option<&E> {
    platform.extension(TypeId::of::<E>())?.downcast_ref::<E>()
}

/// The extension of type `E` that `device`'s platform provides through the
/// device ([`Device::extension`]), if any: how code that holds backends and
/// not their platforms (a model session) reaches, say, a backend's
/// [`crate::SetAbortCallback`] through `backend.device()`.
///
/// ```
/// use gantry_engine::{SetAbortCallback, device_extension};
/// # fn install(backend: &dyn gantry_engine::Backend, cb: gantry_engine::AbortCallback) -> gantry_engine::Result<()> {
/// if let Some(set) = device_extension::<SetAbortCallback>(backend.device()) {
///     (set.0)(backend, Some(cb))?;
/// }
/// # Ok(()) }
/// ```
pub fn device_extension<E: Any>(device: &dyn Device) -> Option<&E> {
    device.extension(TypeId::of::<E>())?.downcast_ref::<E>()
}
