//! The CUDA platform: one device per GPU the driver reports, or none with
//! the reason (a missing library, a driver error), which `gantry devices`
//! prints. Nothing here calls cudarc before the libraries are known to load.

use std::sync::Arc;

use gantry_engine::{Device, Platform};

use super::device::CudaDevice;
use super::gpu::Gpu;
use super::libraries::{self, CudaLibrary};
use super::nvrtc::Arch;

/// The oldest compute capability the kernels run on (`__dp4a` needs 6.1).
pub const MIN_ARCH: Arch = Arch::new(6, 1);

/// Every usable NVIDIA GPU as devices named `cuda0`, `cuda1`, ... in the
/// driver's order. A machine without the driver, NVRTC or cuBLAS has a
/// platform with no devices and says why ([`CudaPlatform::unavailable`]).
pub struct CudaPlatform {
    devices: Vec<CudaDevice>,
    unavailable: Option<String>,
    skipped: Vec<String>,
}

impl CudaPlatform {
    /// Looks for the libraries, then for GPUs.
    pub fn new() -> Self {
        match Self::open() {
            Ok((devices, skipped)) => {
                let unavailable = devices.is_empty().then(|| match skipped.first() {
                    Some(s) => format!("CUDA: no usable GPU ({s})"),
                    None => "CUDA: the driver reports no GPU".to_owned(),
                });
                Self { devices, unavailable, skipped }
            }
            Err(why) => Self { devices: Vec::new(), unavailable: Some(why), skipped: Vec::new() },
        }
    }

    fn open() -> Result<(Vec<CudaDevice>, Vec<String>), String> {
        for library in [CudaLibrary::Driver, CudaLibrary::Nvrtc, CudaLibrary::Cublas] {
            libraries::ensure(library).map_err(|missing| format!("CUDA: {missing}"))?;
        }
        cudarc::driver::result::init().map_err(|e| format!("CUDA: cuInit failed: {e:?}"))?;
        let count =
            cudarc::driver::result::device::get_count().map_err(|e| format!("CUDA: cuDeviceGetCount: {e:?}"))?;
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
        self.unavailable.as_deref()
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
        self.unavailable.clone()
    }
}

/// The CUDA platform of this machine.
pub fn platform() -> Arc<dyn Platform> {
    Arc::new(CudaPlatform::new())
}
