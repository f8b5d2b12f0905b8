//! The CUDA backend on a machine without the NVIDIA driver (CI): the
//! platform lists no device and says why, the default registry still
//! works, and nothing panics. On a machine with a GPU it checks the
//! opposite: devices are listed and there is no reason to give.

use gantry_backends::default_registry;
use gantry_cuda::CudaPlatform;
use gantry_cuda::libraries::{self, CudaLibrary};
use gantry_engine::Platform;

#[test]
fn no_driver_means_no_device_and_a_reason_not_a_panic() {
    let platform = CudaPlatform::new();
    match libraries::ensure(CudaLibrary::Driver) {
        Err(missing) => {
            assert!(platform.cuda_devices().is_empty());
            let why = platform.unavailable_reason().expect("a platform without a driver says why");
            assert!(why.starts_with("CUDA: libcuda.so not found"), "{why}");
            assert_eq!(why, format!("CUDA: {missing}"));
            eprintln!("as expected on this machine: {why}");
        }
        Ok(()) if platform.cuda_devices().is_empty() => {
            // A driver without a usable GPU (or without NVRTC / cuBLAS): still a reason.
            let why = platform.unavailable_reason().expect("no device, so a reason");
            assert!(why.starts_with("CUDA: "), "{why}");
            eprintln!("driver present, no device: {why}");
        }
        Ok(()) => assert!(platform.unavailable_reason().is_none(), "devices found, nothing to explain"),
    }
    let registry = default_registry().unwrap();
    let cuda = registry.find_platform("CUDA").expect("the CUDA platform is registered");
    assert_eq!(cuda.devices().len(), platform.cuda_devices().len());
    assert!(registry.devices().any(|(_, d)| d.name() == "CPU"), "the CPU is always there");
}
