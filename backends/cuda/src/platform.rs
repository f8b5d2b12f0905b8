//! The CUDA platform: one device per GPU the driver reports, or none with
//! the reason (a missing library, a driver error), which `gantry devices`
//! prints. Nothing here calls cudarc before the libraries are known to load.

use std::sync::Arc;

use gantry_engine::{BackendErrorKind, Device, Platform};

use super::device::CudaDevice;
use super::gpu::{Gpu, driver_error_kind};
use super::libraries::{self, CudaLibrary};
use super::nvrtc::Arch;

/// The oldest compute capability the kernels run on (`__dp4a` needs 6.1).
pub const MIN_ARCH: Arch = Arch::new(6, 1);

/// Every usable NVIDIA GPU as devices named `cuda0`, `cuda1`, ... in the
/// driver's order. A machine without the driver, NVRTC or cuBLAS has a
/// platform with no devices and says why ([`CudaPlatform::unavailable`])
/// and what kind of reason it is ([`CudaPlatform::unavailable_kind`]).
pub struct CudaPlatform {
    devices: Vec<CudaDevice>,
    unavailable: Option<(BackendErrorKind, String)>,
    skipped: Vec<String>,
}

impl CudaPlatform {
    /// Looks for the libraries, then for GPUs.
    ///
    /// Environment: the libraries are looked for where the system's loader
    /// looks, then where `GANTRY_NVRTC_PATH` and `GANTRY_CUBLAS_PATH` say,
    /// then in Python's site-packages (found through `python3`,
    /// `VIRTUAL_ENV` and `HOME`; see [`crate::libraries`]), once per
    /// process. The backends made later read `GANTRY_CUDA_GRAPHS` (`0` turns
    /// CUDA graphs off; [`crate::graphs`]) when each is made, and the kernel
    /// cache reads `GANTRY_CUDA_CACHE` (a folder, or `0` for none; else
    /// `XDG_CACHE_HOME` or `HOME`; [`crate::kernel_cache::cache_dir`]) when
    /// a module is first compiled. These are settings of the process, like
    /// the loader's own search path.
    pub fn new() -> Self {
        match Self::open() {
            Ok((devices, skipped)) => {
                let unavailable = devices.is_empty().then(|| match skipped.first() {
                    Some(s) => (BackendErrorKind::DeviceUnavailable, format!("CUDA: no usable GPU ({s})")),
                    None => (BackendErrorKind::DeviceUnavailable, "CUDA: the driver reports no GPU".to_owned()),
                });
                Self { devices, unavailable, skipped }
            }
            Err(why) => Self { devices: Vec::new(), unavailable: Some(why), skipped: Vec::new() },
        }
    }

    /// The devices and the GPUs skipped, or why there can be none and what
    /// kind of reason that is.
    fn open() -> Result<(Vec<CudaDevice>, Vec<String>), (BackendErrorKind, String)> {
        for library in [CudaLibrary::Driver, CudaLibrary::Nvrtc, CudaLibrary::Cublas] {
            libraries::ensure(library).map_err(|missing| (missing_kind(library), format!("CUDA: {missing}")))?;
        }
        cudarc::driver::result::init().map_err(|e| (init_failure_kind(e), format!("CUDA: cuInit failed: {e:?}")))?;
        let count = cudarc::driver::result::device::get_count()
            .map_err(|e| (init_failure_kind(e), format!("CUDA: cuDeviceGetCount: {e:?}")))?;
        let mut devices = Vec::new();
        let mut skipped = Vec::new();
        for ordinal in 0..usize::try_from(count).unwrap_or(0) {
            match Gpu::open(ordinal, format!("cuda{}", devices.len())) {
                Ok(gpu) if gpu.facts.arch < MIN_ARCH => skipped
                    .push(format!("GPU {ordinal} ({}) is {}, older than {MIN_ARCH}", gpu.facts.model, gpu.facts.arch)),
                Ok(gpu) => devices.push(CudaDevice::new(gpu)),
                Err(e) => skipped.push(format!("GPU {ordinal}: {e:?}")),
            }
        }
        Ok((devices, skipped))
    }

    /// The devices, typed.
    pub fn cuda_devices(&self) -> &[CudaDevice] {
        &self.devices
    }

    /// Why there is no device (`"CUDA: libcuda.so not found (...)"`), if so.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_ref().map(|(_, why)| why.as_str())
    }

    /// What kind of reason [`CudaPlatform::unavailable`] is:
    /// [`BackendErrorKind::DriverMissing`] without the driver (or when it
    /// does not initialize), [`BackendErrorKind::LibraryMissing`] without
    /// NVRTC or cuBLAS, [`BackendErrorKind::DeviceUnavailable`] when the
    /// driver has no usable GPU.
    pub fn unavailable_kind(&self) -> Option<BackendErrorKind> {
        self.unavailable.as_ref().map(|(kind, _)| *kind)
    }

    /// GPUs found but not opened, with the reason.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }
}

impl Default for CudaPlatform {
    fn default() -> Self {
        Self::new()
    }
}

impl Platform for CudaPlatform {
    fn name(&self) -> &str {
        "CUDA"
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        self.devices.iter().map(|d| Arc::new(d.clone()) as Arc<dyn Device>).collect()
    }

    fn unavailable_reason(&self) -> Option<String> {
        self.unavailable().map(str::to_owned)
    }

    fn unavailable_kind(&self) -> Option<BackendErrorKind> {
        CudaPlatform::unavailable_kind(self)
    }
}

/// The kind of error a missing `library` is: the driver's is
/// [`BackendErrorKind::DriverMissing`], NVRTC's and cuBLAS's
/// [`BackendErrorKind::LibraryMissing`].
pub fn missing_kind(library: CudaLibrary) -> BackendErrorKind {
    match library {
        CudaLibrary::Driver => BackendErrorKind::DriverMissing,
        CudaLibrary::Nvrtc | CudaLibrary::Cublas => BackendErrorKind::LibraryMissing,
    }
}

/// The kind of a failure of the driver's first calls (`cuInit`,
/// `cuDeviceGetCount`): what the code says ([`driver_error_kind`]), and a
/// missing driver when it says nothing more telling.
pub fn init_failure_kind(e: cudarc::driver::DriverError) -> BackendErrorKind {
    match driver_error_kind(e) {
        BackendErrorKind::Other => BackendErrorKind::DriverMissing,
        kind => kind,
    }
}

/// The CUDA platform of this machine.
pub fn platform() -> Arc<dyn Platform> {
    Arc::new(CudaPlatform::new())
}
