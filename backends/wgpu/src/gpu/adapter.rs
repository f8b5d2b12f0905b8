//! Finding adapters: one per physical GPU, the best API for each.

use ::wgpu;

use super::bindings::{PARAMS_SIZE, STORAGE_SLOTS};

/// What kind of processor an adapter runs on, as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdapterKind {
    /// A GPU with its own memory.
    Discrete,
    /// A GPU sharing host memory.
    Integrated,
    /// A virtual GPU (a VM's passthrough or paravirtual device).
    Virtual,
    /// Software rendering on the CPU (lavapipe, WARP, SwiftShader).
    Cpu,
    /// The driver did not say.
    Other,
}

/// The limits Gantry's kernels and buffers depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuLimits {
    /// Alignment of storage-buffer binding offsets, in bytes.
    pub min_storage_buffer_offset_alignment: u32,
    /// Alignment of uniform-buffer (dynamic) offsets, in bytes.
    pub min_uniform_buffer_offset_alignment: u32,
    /// Largest storage-buffer binding, in bytes.
    pub max_storage_buffer_binding_size: u64,
    /// Largest buffer, in bytes.
    pub max_buffer_size: u64,
    /// Workgroup (shared) memory per workgroup, in bytes.
    pub max_compute_workgroup_storage_size: u32,
    /// Invocations per workgroup.
    pub max_compute_invocations_per_workgroup: u32,
    /// Invocations along a workgroup's x dimension.
    pub max_compute_workgroup_size_x: u32,
    /// Workgroups per dispatch dimension.
    pub max_compute_workgroups_per_dimension: u32,
    /// Storage buffers one shader stage may bind.
    pub max_storage_buffers_per_shader_stage: u32,
    /// Bind groups a pipeline layout may hold.
    pub max_bind_groups: u32,
    /// Bindings one bind group may hold.
    pub max_bindings_per_bind_group: u32,
    /// Uniform buffers with a dynamic offset one pipeline layout may hold.
    pub max_dynamic_uniform_buffers_per_pipeline_layout: u32,
    /// Largest uniform-buffer binding, in bytes.
    pub max_uniform_buffer_binding_size: u64,
}

/// A limit of a device below what Gantry's kernels need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitShortfall {
    /// The limit's name, as `wgpu::Limits` spells its field.
    pub limit: &'static str,
    /// The device's value.
    pub have: u64,
    /// The least value the kernels need.
    pub need: u64,
}

impl std::fmt::Display for LimitShortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is {}, the kernels need at least {}", self.limit, self.have, self.need)
    }
}

impl GpuLimits {
    /// The limits of `l` that Gantry reads (what a device was opened with,
    /// or what an adapter offers).
    pub fn from_limits(l: &wgpu::Limits) -> Self {
        Self {
            min_storage_buffer_offset_alignment: l.min_storage_buffer_offset_alignment,
            min_uniform_buffer_offset_alignment: l.min_uniform_buffer_offset_alignment,
            max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
            max_buffer_size: l.max_buffer_size,
            max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_compute_workgroup_size_x: l.max_compute_workgroup_size_x,
            max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
            max_bind_groups: l.max_bind_groups,
            max_bindings_per_bind_group: l.max_bindings_per_bind_group,
            max_dynamic_uniform_buffers_per_pipeline_layout: l.max_dynamic_uniform_buffers_per_pipeline_layout,
            max_uniform_buffer_binding_size: l.max_uniform_buffer_binding_size,
        }
    }

    /// Every limit below what Gantry's kernels need, with the value needed:
    /// 256-invocation workgroups (along x) with 16 KiB of shared memory
    /// (WebGPU's defaults), 1024 workgroups per dimension, and one bind group
    /// of the parameter block (a dynamic-offset uniform of `PARAMS_SIZE`
    /// bytes) and `STORAGE_SLOTS` storage buffers. Empty when they fit.
    ///
    /// ```
    /// use gantry_wgpu::gpu::GpuLimits;
    /// use gantry_wgpu::wgpu;
    /// let webgpu = GpuLimits::from_limits(&wgpu::Limits::default());
    /// assert!(webgpu.shortfalls().is_empty());
    /// let low = GpuLimits::from_limits(&wgpu::Limits::downlevel_defaults());
    /// assert!(low.shortfalls().iter().any(|s| s.limit == "max_storage_buffers_per_shader_stage"));
    /// ```
    pub fn shortfalls(&self) -> Vec<LimitShortfall> {
        let needs: [(&'static str, u64, u64); 9] = [
            ("max_compute_invocations_per_workgroup", self.max_compute_invocations_per_workgroup.into(), 256),
            ("max_compute_workgroup_size_x", self.max_compute_workgroup_size_x.into(), 256),
            ("max_compute_workgroup_storage_size", self.max_compute_workgroup_storage_size.into(), 16 * 1024),
            ("max_compute_workgroups_per_dimension", self.max_compute_workgroups_per_dimension.into(), 1024),
            (
                "max_storage_buffers_per_shader_stage",
                self.max_storage_buffers_per_shader_stage.into(),
                STORAGE_SLOTS as u64,
            ),
            ("max_bind_groups", self.max_bind_groups.into(), 1),
            ("max_bindings_per_bind_group", self.max_bindings_per_bind_group.into(), 1 + STORAGE_SLOTS as u64),
            (
                "max_dynamic_uniform_buffers_per_pipeline_layout",
                self.max_dynamic_uniform_buffers_per_pipeline_layout.into(),
                1,
            ),
            ("max_uniform_buffer_binding_size", self.max_uniform_buffer_binding_size, PARAMS_SIZE),
        ];
        needs
            .into_iter()
            .filter(|&(_, have, need)| have < need)
            .map(|(limit, have, need)| LimitShortfall { limit, have, need })
            .collect()
    }

    /// Whether Gantry's kernels fit ([`GpuLimits::shortfalls`] is empty).
    pub fn can_run_kernels(&self) -> bool {
        self.shortfalls().is_empty()
    }
}

/// Everything Gantry reads from an adapter before opening it.
#[derive(Debug, Clone)]
pub struct AdapterFacts {
    /// The adapter's name (`"NVIDIA GeForce RTX 4090"`, `"llvmpipe (LLVM 15.0.6, 256 bits)"`).
    pub name: String,
    /// The graphics API it is reached through (`"vulkan"`, `"metal"`, `"dx12"`, `"gl"`).
    pub api: &'static str,
    /// Processor kind.
    pub kind: AdapterKind,
    /// PCI vendor id (0 when the API does not say).
    pub vendor: u32,
    /// PCI device id (0 when the API does not say).
    pub device: u32,
    /// PCI bus address where the API reports it (`"0000:01:00.0"`), else empty.
    pub pci_bus: String,
    /// Driver name and version.
    pub driver: String,
    /// Limits.
    pub limits: GpuLimits,
    /// Whether shaders may use `f16` (`shader-f16`).
    pub shader_f16: bool,
    /// Device-local memory in bytes where the API reports it (Vulkan's
    /// memory heaps); `None` elsewhere, as wgpu itself does not say.
    pub device_memory: Option<u64>,
}

/// Rank of an API for the same GPU: lower is preferred. Native APIs expose
/// the limits and features the kernels want; GL is the last resort.
fn api_rank(backend: wgpu::Backend) -> u8 {
    match backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal => 0,
        wgpu::Backend::Dx12 => 1,
        wgpu::Backend::Gl => 2,
        _ => 3,
    }
}

pub(super) fn facts_of(adapter: &wgpu::Adapter) -> AdapterFacts {
    let info = adapter.get_info();
    let kind = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => AdapterKind::Discrete,
        wgpu::DeviceType::IntegratedGpu => AdapterKind::Integrated,
        wgpu::DeviceType::VirtualGpu => AdapterKind::Virtual,
        wgpu::DeviceType::Cpu => AdapterKind::Cpu,
        wgpu::DeviceType::Other => AdapterKind::Other,
    };
    let driver = match (info.driver.is_empty(), info.driver_info.is_empty()) {
        (false, false) => format!("{} {}", info.driver, info.driver_info),
        (false, true) => info.driver.clone(),
        _ => info.driver_info.clone(),
    };
    AdapterFacts {
        name: info.name.clone(),
        api: info.backend.to_str(),
        kind,
        vendor: info.vendor,
        device: info.device,
        pci_bus: info.device_pci_bus_id.clone(),
        driver,
        limits: GpuLimits::from_limits(&adapter.limits()),
        shader_f16: adapter.features().contains(wgpu::Features::SHADER_F16),
        device_memory: device_memory(adapter),
    }
}

/// The size of the device-local memory heaps, for Vulkan adapters.
#[cfg(any(windows, target_os = "linux", target_os = "android", target_os = "freebsd"))]
fn device_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    // SAFETY: the hal adapter is only read (its physical device's memory
    // properties) while the guard is held; nothing is created or destroyed.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance().raw_instance();
    // SAFETY: FFI into the Vulkan driver; the physical device belongs to this
    // instance and both outlive the call (the guard keeps them alive).
    let props = unsafe { instance.get_physical_device_memory_properties(hal.raw_physical_device()) };
    const DEVICE_LOCAL: u32 = 1; // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
    let heaps = props.memory_heaps.get(..props.memory_heap_count as usize)?;
    let local: u64 = heaps.iter().filter(|h| h.flags.as_raw() & DEVICE_LOCAL != 0).map(|h| h.size).sum();
    (local > 0).then_some(local)
}

/// wgpu reports no memory sizes for Metal, DX12 or GL.
#[cfg(not(any(windows, target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn device_memory(_adapter: &wgpu::Adapter) -> Option<u64> {
    None
}

/// Whether two adapters are the same physical GPU seen through two APIs:
/// different APIs (one API lists each GPU once, so two identical cards stay
/// two devices), the same name, and the same PCI ids and bus address where
/// both APIs report them (GL often reports neither).
fn same_gpu(a: &AdapterFacts, b: &AdapterFacts) -> bool {
    let ids_known = a.vendor != 0 && b.vendor != 0;
    let bus_known = !a.pci_bus.is_empty() && !b.pci_bus.is_empty();
    a.api != b.api
        && a.name == b.name
        && (!ids_known || (a.vendor == b.vendor && a.device == b.device))
        && (!bus_known || a.pci_bus == b.pci_bus)
}

/// An adapter Gantry can use, with its facts.
pub struct FoundAdapter {
    pub(super) adapter: wgpu::Adapter,
    /// What it is.
    pub facts: AdapterFacts,
}

/// Every usable adapter on this machine, one per physical GPU (the best API
/// for each), in the order the system lists them. Adapters that cannot run
/// compute shaders, or whose limits are below what the kernels need, are
/// left out. `WGPU_BACKEND` (e.g. `vulkan`) restricts the APIs searched.
pub fn find_adapters() -> Vec<FoundAdapter> {
    let desc = wgpu::InstanceDescriptor {
        backends: wgpu::Backends::all().with_env(),
        flags: wgpu::InstanceFlags::empty().with_env(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    };
    let instance = wgpu::Instance::new(desc);
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let mut found: Vec<(FoundAdapter, u8)> = Vec::new();
    for adapter in adapters {
        let facts = facts_of(&adapter);
        let compute = adapter.get_downlevel_capabilities().flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS);
        if !compute || !facts.limits.can_run_kernels() {
            continue;
        }
        let rank = api_rank(adapter.get_info().backend);
        match found.iter_mut().find(|(f, _)| same_gpu(&f.facts, &facts)) {
            Some(slot) if rank < slot.1 => *slot = (FoundAdapter { adapter, facts }, rank),
            Some(_) => {}
            None => found.push((FoundAdapter { adapter, facts }, rank)),
        }
    }
    found.into_iter().map(|(f, _)| f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(api: &'static str, name: &str, vendor: u32, device: u32) -> AdapterFacts {
        AdapterFacts {
            name: name.into(),
            api,
            kind: AdapterKind::Discrete,
            vendor,
            device,
            pci_bus: String::new(),
            driver: String::new(),
            limits: GpuLimits {
                min_storage_buffer_offset_alignment: 256,
                min_uniform_buffer_offset_alignment: 256,
                max_storage_buffer_binding_size: 1 << 27,
                max_buffer_size: 1 << 28,
                max_compute_workgroup_storage_size: 16384,
                max_compute_invocations_per_workgroup: 256,
                max_compute_workgroup_size_x: 256,
                max_compute_workgroups_per_dimension: 65535,
                max_storage_buffers_per_shader_stage: 8,
                max_bind_groups: 4,
                max_bindings_per_bind_group: 1000,
                max_dynamic_uniform_buffers_per_pipeline_layout: 8,
                max_uniform_buffer_binding_size: 65536,
            },
            shader_f16: false,
            device_memory: None,
        }
    }

    #[test]
    fn same_gpu_by_name_and_ids() {
        assert!(same_gpu(&facts("vulkan", "A", 0x10de, 1), &facts("dx12", "A", 0x10de, 1)));
        assert!(!same_gpu(&facts("vulkan", "A", 0x10de, 1), &facts("vulkan", "A", 0x10de, 1)), "two identical cards");
        assert!(!same_gpu(&facts("vulkan", "A", 0x10de, 1), &facts("dx12", "A", 0x10de, 2)));
        assert!(same_gpu(&facts("vulkan", "A", 0x10de, 1), &facts("gl", "A", 0, 0)), "GL does not report ids");
        assert!(!same_gpu(&facts("vulkan", "A", 0x10de, 1), &facts("gl", "B", 0x10de, 1)));
        let (mut a, mut b) = (facts("vulkan", "A", 0x10de, 1), facts("dx12", "A", 0x10de, 1));
        a.pci_bus = "0000:01:00.0".into();
        b.pci_bus = "0000:02:00.0".into();
        assert!(!same_gpu(&a, &b), "same model on two slots");
    }

    #[test]
    fn native_apis_rank_before_gl() {
        assert!(api_rank(wgpu::Backend::Vulkan) < api_rank(wgpu::Backend::Gl));
        assert!(api_rank(wgpu::Backend::Metal) < api_rank(wgpu::Backend::Gl));
        assert!(api_rank(wgpu::Backend::Dx12) < api_rank(wgpu::Backend::Gl));
    }

    #[test]
    fn weak_limits_are_refused() {
        let mut l = facts("vulkan", "A", 1, 1).limits;
        assert!(l.can_run_kernels());
        l.max_storage_buffers_per_shader_stage = 4;
        l.max_dynamic_uniform_buffers_per_pipeline_layout = 0;
        assert!(!l.can_run_kernels());
        let short = l.shortfalls();
        assert_eq!(
            short,
            [
                LimitShortfall { limit: "max_storage_buffers_per_shader_stage", have: 4, need: STORAGE_SLOTS as u64 },
                LimitShortfall { limit: "max_dynamic_uniform_buffers_per_pipeline_layout", have: 0, need: 1 },
            ]
        );
        assert_eq!(short[0].to_string(), "max_storage_buffers_per_shader_stage is 4, the kernels need at least 8");
    }

    #[test]
    fn webgpu_defaults_fit_and_downlevel_defaults_do_not() {
        assert!(GpuLimits::from_limits(&wgpu::Limits::default()).can_run_kernels());
        let low: Vec<&str> =
            GpuLimits::from_limits(&wgpu::Limits::downlevel_defaults()).shortfalls().iter().map(|s| s.limit).collect();
        assert_eq!(low, ["max_compute_workgroup_storage_size", "max_storage_buffers_per_shader_stage"]);
    }
}
