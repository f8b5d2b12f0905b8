//! One CUDA device as the backend's objects share it: its primary context
//! (cudarc's own event tracking turned off: Gantry's scheduler orders the
//! streams with its events), what it is (name, compute capability, limits),
//! its loaded modules and kernels, and its events.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute_enum as Attr;
use cudarc::driver::sys::cudaError_enum as Code;
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, DriverError};
use gantry_engine::{BackendErrorKind, Error, EventId, Result};

use super::kernel_cache;
use super::kernels::{Kernel, Module};
use super::libraries::{self, CudaLibrary};
use super::nvrtc::Arch;
use gantry_engine::device_state::{LazyCache, QueueEvents};

/// What a device is, read once when the platform opens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuFacts {
    /// The driver's device ordinal.
    pub ordinal: usize,
    /// The model name (`"NVIDIA H200"`).
    pub model: String,
    /// Compute capability.
    pub arch: Arch,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub total_memory: usize,
    /// Largest grid along y and z.
    pub max_grid_yz: u32,
}

/// A device's shared state. Cheap to share as `Arc<Gpu>`.
pub struct Gpu {
    /// The name in the registry (`"cuda0"`).
    pub name: String,
    /// What it is.
    pub facts: GpuFacts,
    context: Arc<CudaContext>,
    modules: LazyCache<Module, Arc<CudaModule>>,
    functions: LazyCache<Kernel, CudaFunction>,
    /// Events: each id holds its CUDA event from creation (CUDA's
    /// never-recorded event is already the engine's `Created` state:
    /// waiting on it returns at once).
    pub(crate) events: QueueEvents<Arc<CudaEvent>>,
}

impl Gpu {
    /// Opens device `ordinal` as `name`. The driver must be loaded (see
    /// `libraries::ensure`) and initialized.
    pub fn open(ordinal: usize, name: String) -> std::result::Result<Self, DriverError> {
        let context = CudaContext::new(ordinal)?;
        // SAFETY: Gantry orders work between streams itself (its scheduler's
        // events, the backend's copy events) and never frees a buffer while
        // a stream may still use it (buffers free after a synchronize).
        unsafe { context.disable_event_tracking() };
        let (major, minor) = context.compute_capability()?;
        let attr = |a: Attr| context.attribute(a).map(|v| u32::try_from(v).unwrap_or(0));
        let facts = GpuFacts {
            ordinal,
            model: context.name()?,
            arch: Arch::new(u32::try_from(major).unwrap_or(0), u32::try_from(minor).unwrap_or(0)),
            multiprocessors: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            total_memory: context.total_mem()?,
            max_grid_yz: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?
                .min(attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?),
        };
        Ok(Self {
            name,
            facts,
            context,
            modules: LazyCache::default(),
            functions: LazyCache::default(),
            events: QueueEvents::default(),
        })
    }

    /// The context, bound to the calling thread (every driver call needs it current).
    pub fn context(&self) -> Result<&Arc<CudaContext>> {
        self.context.bind_to_thread().map_err(|e| self.error("binding the context", e))?;
        Ok(&self.context)
    }

    /// An error naming this device, what failed and the driver's code, of
    /// the kind the code says ([`driver_error_kind`]); `e` is its source.
    pub fn error(&self, what: &str, e: DriverError) -> Error {
        driver_error(&self.name, what, e)
    }

    /// An error naming this device and what failed, of `kind`.
    pub fn error_of(&self, kind: BackendErrorKind, reason: impl Into<String>) -> Error {
        Error::backend(self.name.clone(), kind, reason)
    }

    /// Free and total device memory.
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.context()?;
        cudarc::driver::result::mem_get_info().map_err(|e| self.error("cuMemGetInfo", e))
    }

    fn module(&self, module: Module) -> Result<Arc<CudaModule>> {
        self.modules.get_or_try_insert_with(&module, || {
            let image = kernel_cache::image(module, self.facts.arch).map_err(|reason| {
                // The platform found NVRTC before opening the device, so a
                // failure here is the compiler's, unless the library is gone.
                let kind = match libraries::ensure(CudaLibrary::Nvrtc) {
                    Ok(()) => BackendErrorKind::KernelCompile,
                    Err(_) => BackendErrorKind::LibraryMissing,
                };
                self.error_of(kind, format!("compiling the {} kernels: {reason}", module.name()))
            })?;
            // cuModuleLoadData takes a CUBIN, or PTX up to its NUL, the same way.
            let ptx = cudarc::nvrtc::Ptx::from_binary(image.bytes.clone());
            self.context.bind_to_thread().map_err(|e| self.error("binding the context", e))?;
            self.context.load_module(ptx).map_err(|e| {
                let what = format!("loading the {} kernels for {}", module.name(), image.target);
                driver_error_as(&self.name, &what, e, BackendErrorKind::KernelCompile)
            })
        })
    }

    /// The kernel, its module compiled and loaded at first use.
    pub fn function(&self, kernel: Kernel) -> Result<CudaFunction> {
        self.functions.get_or_try_insert_with(&kernel, || {
            self.module(kernel.module)?.load_function(kernel.name).map_err(|e| {
                let what = format!("kernel {} of {}", kernel.name, kernel.module.name());
                driver_error_as(&self.name, &what, e, BackendErrorKind::KernelCompile)
            })
        })
    }

    /// Number of modules loaded so far.
    pub fn loaded_modules(&self) -> usize {
        self.modules.len()
    }

    /// The CUDA event of `event`, or a stale-handle error.
    pub fn event(&self, event: EventId) -> Result<Arc<CudaEvent>> {
        match self.events.point(event) {
            Some(Some(ev)) => Ok(ev),
            _ => Err(Error::StaleHandle { kind: "event", handle: format!("{event:?} ({})", self.name) }),
        }
    }
}

impl Gpu {
    /// A new CUDA event without timing (what every Gantry event is).
    pub fn new_event(&self) -> Result<CudaEvent> {
        self.context()?;
        self.context.new_event(None).map_err(|e| self.error("cuEventCreate", e))
    }
}

/// What a CUDA driver error code means for a host:
///
/// - no driver, a stub or mismatched driver, not initialized:
///   [`BackendErrorKind::DriverMissing`];
/// - no device, a device busy (exclusive mode) or invalid:
///   [`BackendErrorKind::DeviceUnavailable`];
/// - an image the device cannot load (bad PTX, no binary for the GPU, PTX
///   too new for the driver, no JIT, a symbol it links missing):
///   [`BackendErrorKind::KernelCompile`];
/// - out of memory: [`BackendErrorKind::OutOfDeviceMemory`];
/// - an error that leaves the context unusable (an illegal address or
///   instruction, a failed launch, an ECC error, a destroyed context, a
///   launch timeout): [`BackendErrorKind::DeviceLost`];
/// - not supported, too many resources asked by a launch, peer access the
///   GPUs do not have: [`BackendErrorKind::Unsupported`];
/// - anything else: [`BackendErrorKind::Other`].
pub fn driver_error_kind(e: DriverError) -> BackendErrorKind {
    match e.0 {
        Code::CUDA_ERROR_STUB_LIBRARY
        | Code::CUDA_ERROR_NOT_INITIALIZED
        | Code::CUDA_ERROR_DEINITIALIZED
        | Code::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | Code::CUDA_ERROR_SYSTEM_NOT_READY
        | Code::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => BackendErrorKind::DriverMissing,
        Code::CUDA_ERROR_NO_DEVICE
        | Code::CUDA_ERROR_INVALID_DEVICE
        | Code::CUDA_ERROR_DEVICE_UNAVAILABLE
        | Code::CUDA_ERROR_DEVICE_NOT_LICENSED => BackendErrorKind::DeviceUnavailable,
        Code::CUDA_ERROR_INVALID_IMAGE
        | Code::CUDA_ERROR_INVALID_PTX
        | Code::CUDA_ERROR_NO_BINARY_FOR_GPU
        | Code::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | Code::CUDA_ERROR_JIT_COMPILER_NOT_FOUND
        | Code::CUDA_ERROR_JIT_COMPILATION_DISABLED
        | Code::CUDA_ERROR_INVALID_SOURCE
        | Code::CUDA_ERROR_SHARED_OBJECT_INIT_FAILED
        | Code::CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND => BackendErrorKind::KernelCompile,
        Code::CUDA_ERROR_OUT_OF_MEMORY => BackendErrorKind::OutOfDeviceMemory,
        Code::CUDA_ERROR_ILLEGAL_ADDRESS
        | Code::CUDA_ERROR_ILLEGAL_INSTRUCTION
        | Code::CUDA_ERROR_MISALIGNED_ADDRESS
        | Code::CUDA_ERROR_INVALID_ADDRESS_SPACE
        | Code::CUDA_ERROR_INVALID_PC
        | Code::CUDA_ERROR_HARDWARE_STACK_ERROR
        | Code::CUDA_ERROR_LAUNCH_FAILED
        | Code::CUDA_ERROR_LAUNCH_TIMEOUT
        | Code::CUDA_ERROR_ECC_UNCORRECTABLE
        | Code::CUDA_ERROR_NVLINK_UNCORRECTABLE
        | Code::CUDA_ERROR_CONTEXT_IS_DESTROYED
        | Code::CUDA_ERROR_ASSERT
        | Code::CUDA_ERROR_EXTERNAL_DEVICE => BackendErrorKind::DeviceLost,
        Code::CUDA_ERROR_NOT_SUPPORTED
        | Code::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
        | Code::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
        | Code::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
        | Code::CUDA_ERROR_UNSUPPORTED_LIMIT
        | Code::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED => BackendErrorKind::Unsupported,
        _ => BackendErrorKind::Other,
    }
}

/// An error of device (or platform) `name`: `what` failed with the driver's
/// error `e`, of the kind [`driver_error_kind`] says; `e` is its source.
pub fn driver_error(name: &str, what: &str, e: DriverError) -> Error {
    Error::backend_with_source(name, driver_error_kind(e), format!("{what}: {}", describe(e)), e)
}

/// `e` in words: cudarc's description asks the driver (`cuGetErrorString`),
/// so without a loaded driver (where cudarc would panic) only the code.
fn describe(e: DriverError) -> String {
    match libraries::ensure(CudaLibrary::Driver) {
        Ok(()) => format!("{e:?}"),
        Err(_) => format!("DriverError({:?})", e.0),
    }
}

/// [`driver_error`] for a call whose failures are of kind `otherwise`
/// unless the code says something more telling (loading a module: an
/// unclassified failure is the image's).
fn driver_error_as(name: &str, what: &str, e: DriverError, otherwise: BackendErrorKind) -> Error {
    let kind = match driver_error_kind(e) {
        BackendErrorKind::Other => otherwise,
        kind => kind,
    };
    Error::backend_with_source(name, kind, format!("{what}: {}", describe(e)), e)
}
