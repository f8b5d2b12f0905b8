//! The default registry: what was compiled in and found on this machine,
//! looked up and started by name.

use gantry_backends::{cpu, default_registry};
use gantry_engine::DeviceType;

#[test]
fn registry_finds_and_starts_the_cpu() {
    let registry = default_registry().unwrap();
    let id = registry.find_device("cpu").expect("case-insensitive lookup");
    let device = registry.device(id).unwrap();
    assert_eq!((device.name(), device.device_type()), ("CPU", DeviceType::Cpu));
    assert!(!device.description().is_empty());
    let props = device.props();
    assert!(props.caps.buffer_from_host_ptr && props.caps.events && !props.caps.async_compute);
    if cfg!(target_os = "linux") {
        assert!(props.memory.total > 0 && props.memory.free <= props.memory.total);
    }
    assert_eq!(registry.init_best().unwrap().name(), "CPU");
    assert_eq!(registry.init_by_name("CPU", Some("threads=3")).unwrap().name(), "CPU");
    let err = registry.init_by_name("CPU", Some("turbo")).err().unwrap().to_string();
    assert!(err.contains("threads=N"), "{err}");
    let err = registry.init_by_name("Vulkan7", None).err().unwrap().to_string();
    assert!(err.contains("Vulkan7") && err.contains("CPU"), "{err}");
    assert!(device.supports_buft(cpu::buffer_type().as_ref()));
    assert!(device.supports_buft(cpu::mapped_buffer_type().as_ref()));
}

/// The CUDA platform is registered whether or not this machine has a
/// driver, with the devices the platform itself finds (none without one).
#[cfg(feature = "cuda")]
#[test]
fn the_cuda_platform_is_registered_with_the_devices_it_finds() {
    let platform = gantry_backends::cuda::CudaPlatform::new();
    let registry = default_registry().unwrap();
    let cuda = registry.find_platform("CUDA").expect("the CUDA platform is registered");
    assert_eq!(cuda.devices().len(), platform.cuda_devices().len());
    assert!(registry.devices().any(|(_, d)| d.name() == "CPU"), "the CPU is always there");
}
