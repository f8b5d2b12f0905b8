//! The wgpu platform: one device per physical GPU on this machine, or the
//! one device a host program opened itself.

use std::sync::Arc;

use gantry_engine::{Device, Platform};

use ::wgpu;
use gantry_engine::Result;

use super::device::WgpuDevice;
use super::gpu::{Gpu, find_adapters};

/// Every GPU wgpu finds, as devices named `wgpu0`, `wgpu1`, ... in the
/// order the system lists them ([`WgpuPlatform::new`]; a machine without a
/// usable adapter has a platform with no devices, not an error), or the
/// host's own device ([`WgpuPlatform::from_host`]).
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

    /// The device a host program opened itself, as the one device `wgpu0`
    /// (see [`WgpuPlatform::from_host_named`]).
    pub fn from_host(adapter: &wgpu::Adapter, device: &wgpu::Device, queue: &wgpu::Queue) -> Result<Self> {
        Self::from_host_named("wgpu0", adapter, device, queue)
    }

    /// The device a host program opened from `adapter`, with its `queue`, as
    /// the one device `name`. Gantry keeps clones of the three handles; the
    /// host keeps using its own.
    ///
    /// - **Submissions.** Gantry's computes, copies and reads are
    ///   submissions to `queue`, interleaved with the host's in the order the
    ///   calls are made. Queue order is the only ordering between the two: a
    ///   host pass submitted after Gantry's compute sees its results, one
    ///   submitted before it is seen by it.
    /// - **Waits.** Gantry waits only for points of its own submissions
    ///   (`Backend::synchronize`, events, tensor reads): everything
    ///   submitted before such a point has run by then (one in-order
    ///   queue), and nothing submitted after it is waited for. Gantry never
    ///   waits for the whole queue. Its waits poll the device, which may run
    ///   the host's mapping and work-done callbacks on Gantry's thread (as a
    ///   host's poll may run Gantry's).
    /// - **Threads.** wgpu's handles are shared between threads; the host
    ///   may record and submit from any thread while Gantry computes on
    ///   another.
    /// - **Errors.** Gantry catches the errors of its own wgpu calls with
    ///   error scopes (per thread) and returns them as `Err`; it installs no
    ///   uncaptured-error handler, so the host's stays in place and sees
    ///   only the host's errors.
    ///
    /// `Err` when the device was not opened from `adapter`, the adapter
    /// cannot run compute shaders, or the device was opened with limits
    /// below what the kernels need: each such limit is named with its value,
    /// the value needed and whether the adapter offers it. Requesting
    /// `adapter.limits()` asks for all the adapter offers; WebGPU's defaults
    /// (`wgpu::Limits::default()`) are enough for the kernels, but cap one
    /// buffer at 128 MiB. Gantry uses `shader-f16` when the device has it.
    ///
    /// ```no_run
    /// use gantry_wgpu::{WgpuPlatform, wgpu};
    /// # fn host() -> gantry_engine::Result<()> {
    /// let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    /// let adapter = pollster::block_on(instance.request_adapter(&Default::default())).expect("an adapter");
    /// let desc = wgpu::DeviceDescriptor { required_limits: adapter.limits(), ..Default::default() };
    /// let (device, queue) = pollster::block_on(adapter.request_device(&desc)).expect("a device");
    /// let platform = WgpuPlatform::from_host(&adapter, &device, &queue)?;
    /// let gpu = &platform.wgpu_devices()[0]; // a Device: `gpu.init_backend(None)` for the scheduler
    /// # Ok(()) }
    /// ```
    pub fn from_host_named(
        name: &str,
        adapter: &wgpu::Adapter,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
    ) -> Result<Self> {
        let gpu = Gpu::from_host(adapter, device, queue, name.to_string())?;
        Ok(Self { devices: vec![WgpuDevice::new(gpu)], skipped: Vec::new() })
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
