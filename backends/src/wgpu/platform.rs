//! The wgpu platform: one device per physical GPU on this machine.

use std::sync::Arc;

use gantry_engine::{Device, Platform};

use super::device::WgpuDevice;
use super::gpu::{Gpu, find_adapters};

/// Every GPU wgpu finds, as devices named `wgpu0`, `wgpu1`, ... in the
/// order the system lists them. A machine without a usable adapter has a
/// platform with no devices (not an error).
pub struct WgpuPlatform {
    devices: Vec<WgpuDevice>,
    skipped: Vec<String>,
}

impl WgpuPlatform {
    /// Finds the adapters and opens each; one that fails to open is left
    /// out and noted in [`WgpuPlatform::skipped`].
    pub fn new() -> Self {
        let mut devices = Vec::new();
        let mut skipped = Vec::new();
        for found in find_adapters() {
            let what = format!("{} ({})", found.facts.name, found.facts.api);
            match Gpu::open(found, format!("wgpu{}", devices.len())) {
                Ok(gpu) => devices.push(WgpuDevice::new(gpu)),
                Err(e) => skipped.push(format!("{what}: {e}")),
            }
        }
        Self { devices, skipped }
    }

    /// The devices, typed.
    pub fn wgpu_devices(&self) -> &[WgpuDevice] {
        &self.devices
    }

    /// Adapters found but not opened, with the reason.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }
}

impl Default for WgpuPlatform {
    fn default() -> Self {
        Self::new()
    }
}

impl Platform for WgpuPlatform {
    fn name(&self) -> &str {
        "wgpu"
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        self.devices.iter().map(|d| Arc::new(d.clone()) as Arc<dyn Device>).collect()
    }
}

/// The wgpu platform of this machine.
pub fn platform() -> Arc<dyn Platform> {
    Arc::new(WgpuPlatform::new())
}
