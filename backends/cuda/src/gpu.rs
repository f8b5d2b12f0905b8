//! One CUDA device as the backend's objects share it: its primary context
//! (cudarc's own event tracking turned off: Gantry's scheduler orders the
//! streams with its events), what it is (name, compute capability, limits),
//! its loaded modules and kernels, and its events.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute_enum as Attr;
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, DriverError};
use gantry_engine::{Error, EventId, Result};

use super::kernel_cache;
use super::kernels::{Kernel, Module};
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

    /// An error naming this device and what failed.
    pub fn error(&self, what: &str, e: impl std::fmt::Debug) -> Error {
        Error::Backend { backend: self.name.clone(), reason: format!("{what}: {e:?}") }
    }

    /// Free and total device memory.
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.context()?;
        cudarc::driver::result::mem_get_info().map_err(|e| self.error("cuMemGetInfo", e))
    }

    fn module(&self, module: Module) -> Result<Arc<CudaModule>> {
        self.modules.get_or_try_insert_with(&module, || {
            let image = kernel_cache::image(module, self.facts.arch).map_err(|reason| Error::Backend {
                backend: self.name.clone(),
                reason: format!("compiling the {} kernels: {reason}", module.name()),
            })?;
            // cuModuleLoadData takes a CUBIN, or PTX up to its NUL, the same way.
            let ptx = cudarc::nvrtc::Ptx::from_binary(image.bytes.clone());
            self.context.bind_to_thread().map_err(|e| self.error("binding the context", e))?;
            self.context
                .load_module(ptx)
                .map_err(|e| self.error(&format!("loading the {} kernels for {}", module.name(), image.target), e))
        })
    }

    /// The kernel, its module compiled and loaded at first use.
    pub fn function(&self, kernel: Kernel) -> Result<CudaFunction> {
        self.functions.get_or_try_insert_with(&kernel, || {
            self.module(kernel.module)?
                .load_function(kernel.name)
                .map_err(|e| self.error(&format!("kernel {} of {}", kernel.name, kernel.module.name()), e))
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
