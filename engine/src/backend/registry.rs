//! The registry of platforms and devices: a value, not a global.

use std::sync::Arc;

use gantry_arenas::DeviceId;
use slotmap::SlotMap;

use crate::{Backend, Device, DeviceType, Error, Platform, Result};

struct RegisteredDevice {
    device: Arc<dyn Device>,
    platform: usize,
}

/// Platforms and their devices, in registration order (ggml's
/// `ggml_backend_reg` list, as a value). `gantry::Registry::with_defaults()`
/// fills one with what was compiled in and found on this machine.
///
/// ```no_run
/// # fn demo(registry: &gantry_engine::Registry) -> gantry_engine::Result<()> {
/// for (id, device) in registry.devices() {
///     println!("{id:?}: {} ({})", device.name(), device.description());
/// }
/// let backend = registry.init_best()?; // first GPU, else IGPU, else CPU
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct Registry {
    platforms: Vec<Arc<dyn Platform>>,
    devices: SlotMap<DeviceId, RegisteredDevice>,
    order: Vec<DeviceId>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `platform` and every device it reports. A platform or device
    /// whose name is already registered is an `Err`.
    pub fn register_platform(&mut self, platform: Arc<dyn Platform>) -> Result<()> {
        if self.find_platform(platform.name()).is_some() {
            return Err(Error::Unsupported(format!("platform {} is already registered", platform.name())));
        }
        self.platforms.push(platform.clone());
        for device in platform.devices() {
            self.register_device(platform.name(), device)?;
        }
        Ok(())
    }

    /// Registers one more device of the registered platform `platform`.
    pub fn register_device(&mut self, platform: &str, device: Arc<dyn Device>) -> Result<DeviceId> {
        let platform = self
            .platforms
            .iter()
            .position(|p| p.name().eq_ignore_ascii_case(platform))
            .ok_or_else(|| Error::NotFound(format!("platform {platform}")))?;
        if self.find_device(device.name()).is_some() {
            return Err(Error::Unsupported(format!("device {} is already registered", device.name())));
        }
        let id = self.devices.insert(RegisteredDevice { device, platform });
        self.order.push(id);
        Ok(id)
    }

    /// Registered platforms, in order.
    pub fn platforms(&self) -> &[Arc<dyn Platform>] {
        &self.platforms
    }

    /// The platform named `name` (case-insensitive).
    pub fn find_platform(&self, name: &str) -> Option<&Arc<dyn Platform>> {
        self.platforms.iter().find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// Registered devices, in registration order.
    pub fn devices(&self) -> impl Iterator<Item = (DeviceId, &Arc<dyn Device>)> + '_ {
        self.order.iter().map(|&id| (id, &self.devices[id].device))
    }

    /// Number of registered devices.
    pub fn device_count(&self) -> usize {
        self.order.len()
    }

    /// The device with handle `id`.
    pub fn device(&self, id: DeviceId) -> Result<&Arc<dyn Device>> {
        self.devices
            .get(id)
            .map(|d| &d.device)
            .ok_or_else(|| Error::StaleHandle { kind: "device", handle: format!("{id:?}") })
    }

    /// The platform a device belongs to.
    pub fn platform_of(&self, id: DeviceId) -> Result<&Arc<dyn Platform>> {
        let d = self.devices.get(id).ok_or_else(|| Error::StaleHandle { kind: "device", handle: format!("{id:?}") })?;
        Ok(&self.platforms[d.platform])
    }

    /// The device named `name` (case-insensitive).
    pub fn find_device(&self, name: &str) -> Option<DeviceId> {
        self.devices().find(|(_, d)| d.name().eq_ignore_ascii_case(name)).map(|(id, _)| id)
    }

    /// The first device of type `device_type`.
    pub fn find_by_type(&self, device_type: DeviceType) -> Option<DeviceId> {
        self.devices().find(|(_, d)| d.device_type() == device_type).map(|(id, _)| id)
    }

    fn known_names(&self) -> String {
        let names: Vec<&str> = self.devices().map(|(_, d)| d.name()).collect();
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    }

    /// Starts a backend on the device named `name` (case-insensitive).
    pub fn init_by_name(&self, name: &str, params: Option<&str>) -> Result<Arc<dyn Backend>> {
        let id = self
            .find_device(name)
            .ok_or_else(|| Error::NotFound(format!("device {name:?} (known devices: {})", self.known_names())))?;
        self.device(id)?.init_backend(params)
    }

    /// Starts a backend on the first device of type `device_type`.
    pub fn init_by_type(&self, device_type: DeviceType, params: Option<&str>) -> Result<Arc<dyn Backend>> {
        let id = self.find_by_type(device_type).ok_or_else(|| {
            Error::NotFound(format!("a {} device (known devices: {})", device_type.name(), self.known_names()))
        })?;
        self.device(id)?.init_backend(params)
    }

    /// Starts a backend on the best device: the first GPU, else the first
    /// integrated GPU, else the CPU (software GPUs are passed over).
    pub fn init_best(&self) -> Result<Arc<dyn Backend>> {
        [DeviceType::Gpu, DeviceType::IGpu, DeviceType::Cpu]
            .into_iter()
            .find_map(|t| self.devices().find(|(_, d)| d.device_type() == t && !d.is_software()).map(|(id, _)| id))
            .ok_or_else(|| Error::NotFound("any device: the registry is empty".into()))
            .and_then(|id| self.device(id)?.init_backend(None))
    }

    /// The devices in scheduler priority order: GPUs, then integrated GPUs,
    /// then accelerators, then the CPU last. Software GPUs (slower than the
    /// CPU backend) are left out; name them to use them.
    pub fn devices_by_priority(&self) -> Vec<DeviceId> {
        let rank = |t: DeviceType| match t {
            DeviceType::Gpu => 0,
            DeviceType::IGpu => 1,
            DeviceType::Accel => 2,
            DeviceType::Cpu => 3,
        };
        let mut ids: Vec<DeviceId> =
            self.order.iter().copied().filter(|&id| !self.devices[id].device.is_software()).collect();
        ids.sort_by_key(|&id| rank(self.devices[id].device.device_type()));
        ids
    }

    /// A backend on every device, in scheduler priority order (CPU last).
    pub fn backends_by_priority(&self) -> Result<Vec<Arc<dyn Backend>>> {
        self.devices_by_priority().into_iter().map(|id| self.device(id)?.init_backend(None)).collect()
    }

    /// Backends for `names`, in the given order (`--backends LIST`): a device
    /// name starts that device; a platform name (`wgpu`, `cpu`) starts every
    /// device of that platform. Matching is case-insensitive. A platform
    /// named that found no device is an [`Error::Backend`] of the kind it
    /// gives ([`Platform::unavailable_kind`]: a missing driver, ...), or
    /// [`Error::NotFound`] when it gives none.
    pub fn backends_by_names(&self, names: &[&str]) -> Result<Vec<Arc<dyn Backend>>> {
        let mut out = Vec::new();
        for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
            if let Some(id) = self.find_device(name) {
                out.push(self.device(id)?.init_backend(None)?);
                continue;
            }
            let platform =
                self.platforms.iter().position(|p| p.name().eq_ignore_ascii_case(name)).ok_or_else(|| {
                    let platforms: Vec<&str> = self.platforms.iter().map(|p| p.name()).collect();
                    Error::NotFound(format!(
                        "backend {name:?} (devices: {}; platforms: {})",
                        self.known_names(),
                        platforms.join(", ")
                    ))
                })?;
            let devices: Vec<DeviceId> =
                self.order.iter().copied().filter(|&id| self.devices[id].platform == platform).collect();
            if devices.is_empty() {
                let found = &self.platforms[platform];
                let missing = format!("platform {name} found no device on this machine");
                return Err(match (found.unavailable_kind(), found.unavailable_reason()) {
                    (Some(kind), Some(why)) => Error::backend(found.name(), kind, format!("{missing}: {why}")),
                    (Some(kind), None) => Error::backend(found.name(), kind, missing),
                    (None, _) => Error::NotFound(missing),
                });
            }
            for id in devices {
                out.push(self.devices[id].device.init_backend(None)?);
            }
        }
        Ok(out)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("platforms", &self.platforms.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("devices", &self.devices().map(|(_, d)| d.name()).collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BackendErrorKind;

    /// A platform with no device, and maybe a reason of some kind.
    struct Empty {
        name: &'static str,
        why: Option<(BackendErrorKind, &'static str)>,
    }

    impl Platform for Empty {
        fn name(&self) -> &str {
            self.name
        }

        fn devices(&self) -> Vec<Arc<dyn Device>> {
            Vec::new()
        }

        fn unavailable_reason(&self) -> Option<String> {
            self.why.map(|(_, why)| why.to_owned())
        }

        fn unavailable_kind(&self) -> Option<BackendErrorKind> {
            self.why.map(|(kind, _)| kind)
        }
    }

    #[test]
    fn a_platform_without_devices_says_what_kind_of_reason_it_has() {
        let mut registry = Registry::new();
        let why = Some((BackendErrorKind::DriverMissing, "CUDA: libcuda.so not found"));
        registry.register_platform(Arc::new(Empty { name: "CUDA", why })).unwrap();
        registry.register_platform(Arc::new(Empty { name: "quiet", why: None })).unwrap();
        let missing = registry.backends_by_names(&["cuda"]).map(|_| ()).unwrap_err();
        assert_eq!(missing.backend_kind(), Some(BackendErrorKind::DriverMissing));
        assert_eq!(
            missing.to_string(),
            "backend CUDA: platform cuda found no device on this machine: CUDA: libcuda.so not found"
        );
        let quiet = registry.backends_by_names(&["quiet"]).map(|_| ()).unwrap_err();
        assert!(matches!(quiet, Error::NotFound(_)), "{quiet}");
    }
}
