//! A host program's own wgpu device as a Gantry GPU: the checks that it
//! can run the kernels, with what to request when it cannot.

use std::sync::Arc;

use ::wgpu;
use gantry_engine::{BackendErrorKind, Error, Result};

use super::adapter::{GpuLimits, facts_of};
use super::context::{Gpu, GpuOwner};

impl Gpu {
    /// Adopts a device the host opened from `adapter`, with its queue.
    /// Gantry keeps clones of the handles (the host keeps using its own),
    /// never installs an uncaptured-error handler on the device, and
    /// submits to `queue` beside the host's work.
    ///
    /// `Err` when the device was not made from `adapter`, when the adapter
    /// cannot run compute shaders, or when the device was opened with a
    /// limit below what the kernels need: the message names each such
    /// limit, its value, the value needed and what the adapter offers, so
    /// the host can request it (`DeviceDescriptor::required_limits`).
    /// Features are optional: `shader-f16` is used when the device was
    /// opened with it.
    pub fn from_host(
        adapter: &wgpu::Adapter,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        name: String,
    ) -> Result<Arc<Gpu>> {
        let refuse = |kind: BackendErrorKind, reason: String| Error::backend(name.clone(), kind, reason);
        let mut facts = facts_of(adapter);
        let what = format!("the host's device on {} ({})", facts.name, facts.api);
        if device.adapter_info() != adapter.get_info() {
            let other = device.adapter_info();
            return Err(refuse(
                BackendErrorKind::Other,
                format!(
                    "{what}: the device was opened from another adapter ({} ({}))",
                    other.name,
                    other.backend.to_str()
                ),
            ));
        }
        if !adapter.get_downlevel_capabilities().flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
            return Err(refuse(
                BackendErrorKind::Unsupported,
                format!("{what}: the adapter cannot run compute shaders"),
            ));
        }
        let offered = facts.limits;
        facts.limits = GpuLimits::from_limits(&device.limits());
        let short = facts.limits.shortfalls();
        if !short.is_empty() {
            let offered_short = offered.shortfalls();
            let listed: Vec<String> = short
                .iter()
                .map(|s| {
                    let can = !offered_short.iter().any(|o| o.limit == s.limit);
                    let offer = if can { "the adapter offers enough" } else { "the adapter cannot" };
                    format!("{s} ({offer})")
                })
                .collect();
            return Err(refuse(
                BackendErrorKind::Unsupported,
                format!(
                    "{what} cannot run Gantry's kernels: {}; request these in DeviceDescriptor::required_limits \
                 (adapter.limits() asks for everything the adapter offers)",
                    listed.join("; ")
                ),
            ));
        }
        facts.shader_f16 = device.features().contains(wgpu::Features::SHADER_F16);
        Self::assemble(facts, name, GpuOwner::Host, device.clone(), queue.clone(), None, Arc::default())
    }
}
