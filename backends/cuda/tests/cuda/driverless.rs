//! The CUDA backend on a machine without the NVIDIA driver (CI): the
//! platform lists no device and says why, the default registry still
//! works, and nothing panics. On a machine with a GPU it checks the
//! opposite: devices are listed and there is no reason to give.

use cudarc::driver::DriverError;
use cudarc::driver::sys::cudaError_enum as Code;
use gantry_cuda::libraries::{self, CudaLibrary};
use gantry_cuda::{
    CublasStatus, CudaPlatform, blas_error_kind, driver_error, driver_error_kind, init_failure_kind, missing_kind,
};
use gantry_engine::{BackendErrorKind, Error, Platform};

#[test]
fn no_driver_means_no_device_and_a_reason_not_a_panic() {
    let platform = CudaPlatform::new();
    match libraries::ensure(CudaLibrary::Driver) {
        Err(missing) => {
            assert!(platform.cuda_devices().is_empty());
            let why = platform.unavailable_reason().expect("a platform without a driver says why");
            assert!(why.starts_with("CUDA: libcuda.so not found"), "{why}");
            assert_eq!(why, format!("CUDA: {missing}"));
            assert_eq!(platform.unavailable_kind(), Some(BackendErrorKind::DriverMissing));
            assert_eq!(Platform::unavailable_kind(&platform), Some(BackendErrorKind::DriverMissing));
            eprintln!("as expected on this machine: {why}");
        }
        Ok(()) if platform.cuda_devices().is_empty() => {
            // A driver without a usable GPU (or without NVRTC / cuBLAS): still a reason.
            let why = platform.unavailable_reason().expect("no device, so a reason");
            assert!(why.starts_with("CUDA: "), "{why}");
            let kind = platform.unavailable_kind().expect("a reason has a kind");
            let missing =
                [CudaLibrary::Nvrtc, CudaLibrary::Cublas].into_iter().find(|&l| libraries::ensure(l).is_err());
            match missing {
                Some(library) => assert_eq!(kind, BackendErrorKind::LibraryMissing, "{library:?}: {why}"),
                None => assert_ne!(kind, BackendErrorKind::LibraryMissing, "{why}"),
            }
            eprintln!("driver present, no device ({kind}): {why}");
        }
        Ok(()) => {
            assert!(platform.unavailable_reason().is_none(), "devices found, nothing to explain");
            assert!(platform.unavailable_kind().is_none());
        }
    }
}

#[test]
fn a_missing_library_is_of_the_kind_that_says_which() {
    assert_eq!(missing_kind(CudaLibrary::Driver), BackendErrorKind::DriverMissing);
    assert_eq!(missing_kind(CudaLibrary::Nvrtc), BackendErrorKind::LibraryMissing);
    assert_eq!(missing_kind(CudaLibrary::Cublas), BackendErrorKind::LibraryMissing);
}

#[test]
fn driver_codes_map_to_the_kinds_a_host_acts_on() {
    let cases = [
        (Code::CUDA_ERROR_STUB_LIBRARY, BackendErrorKind::DriverMissing),
        (Code::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, BackendErrorKind::DriverMissing),
        (Code::CUDA_ERROR_NO_DEVICE, BackendErrorKind::DeviceUnavailable),
        (Code::CUDA_ERROR_DEVICE_UNAVAILABLE, BackendErrorKind::DeviceUnavailable),
        (Code::CUDA_ERROR_INVALID_PTX, BackendErrorKind::KernelCompile),
        (Code::CUDA_ERROR_NO_BINARY_FOR_GPU, BackendErrorKind::KernelCompile),
        (Code::CUDA_ERROR_UNSUPPORTED_PTX_VERSION, BackendErrorKind::KernelCompile),
        (Code::CUDA_ERROR_OUT_OF_MEMORY, BackendErrorKind::OutOfDeviceMemory),
        (Code::CUDA_ERROR_ILLEGAL_ADDRESS, BackendErrorKind::DeviceLost),
        (Code::CUDA_ERROR_LAUNCH_FAILED, BackendErrorKind::DeviceLost),
        (Code::CUDA_ERROR_ECC_UNCORRECTABLE, BackendErrorKind::DeviceLost),
        (Code::CUDA_ERROR_NOT_SUPPORTED, BackendErrorKind::Unsupported),
        (Code::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, BackendErrorKind::Unsupported),
        (Code::CUDA_ERROR_INVALID_VALUE, BackendErrorKind::Other),
        (Code::CUDA_ERROR_UNKNOWN, BackendErrorKind::Other),
    ];
    for (code, kind) in cases {
        assert_eq!(driver_error_kind(DriverError(code)), kind, "{code:?}");
        let e = driver_error("cuda0", "cuLaunchKernel", DriverError(code));
        assert_eq!(e.backend_kind(), Some(kind), "{code:?}");
        assert!(e.to_string().starts_with("backend cuda0: cuLaunchKernel: "), "{e}");
        let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<DriverError>());
        assert_eq!(source.map(|d| d.0), Some(code), "the driver's error is the source");
    }
    // The driver's first calls: an unclassified failure means no usable driver.
    assert_eq!(init_failure_kind(DriverError(Code::CUDA_ERROR_UNKNOWN)), BackendErrorKind::DriverMissing);
    assert_eq!(init_failure_kind(DriverError(Code::CUDA_ERROR_NO_DEVICE)), BackendErrorKind::DeviceUnavailable);
    assert_eq!(blas_error_kind(CublasStatus::ALLOC_FAILED), BackendErrorKind::OutOfDeviceMemory);
    assert_eq!(blas_error_kind(CublasStatus::ARCH_MISMATCH), BackendErrorKind::Unsupported);
    assert_eq!(blas_error_kind(CublasStatus::EXECUTION_FAILED), BackendErrorKind::Other);
    // A code a newer cuBLAS adds is a number, not undefined behaviour.
    assert_eq!(blas_error_kind(CublasStatus(99)), BackendErrorKind::Other);
    assert_eq!(CublasStatus(99).to_string(), "cuBLAS status 99");
    assert_eq!(CublasStatus::ALLOC_FAILED.to_string(), "CUBLAS_STATUS_ALLOC_FAILED");
    assert!(matches!(driver_error("cuda0", "x", DriverError(Code::CUDA_ERROR_UNKNOWN)), Error::Backend { .. }));
}

#[test]
fn nvrtc_and_cublas_where_found_load_without_a_driver_and_say_their_versions() {
    // Loading them and reading their versions needs no driver: CI (NVRTC
    // only), or `GANTRY_CUBLAS_PATH` pointing at a wheel's folder.
    let described = libraries::describe();
    eprintln!("{described}");
    match libraries::ensure(CudaLibrary::Nvrtc) {
        Ok(()) => assert!(described.starts_with("NVRTC 1"), "{described}"),
        Err(missing) => assert!(described.starts_with(&missing.to_string()), "{described}"),
    }
    match libraries::ensure(CudaLibrary::Cublas) {
        Ok(()) => assert!(described.contains("; cuBLAS 1"), "{described}"),
        Err(missing) => assert!(described.ends_with(&missing.to_string()), "{described}"),
    }
}
