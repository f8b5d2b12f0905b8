//! A cuBLAS handle bound to one backend's stream, with its own workspace
//! (so products can be captured into CUDA graphs without cuBLAS allocating
//! during the capture), running the plan's [`GemmLaunch`]es.
//!
//! cuBLAS is called through a function table of its own ([`CublasApi`]),
//! loaded from whichever library [`crate::libraries`] chose: the functions
//! used here have the same names, arguments and status codes in CUDA 12's
//! `libcublas.so.12` and CUDA 13's `libcublas.so.13`.

use std::ffi::{c_int, c_longlong, c_void};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::CUstream;
use gantry_engine::{BackendErrorKind, Result};

use super::buffer::CudaBuffer;
use super::gpu::Gpu;
use super::launch::{GemmLaunch, GemmType};
use super::libraries::{self, CudaLibrary, LoadedLibrary, MissingLibrary};

/// cuBLAS's recommended workspace on Hopper (enough for every earlier GPU).
const WORKSPACE_BYTES: usize = 32 << 20;

/// A cuBLAS status (`cublasStatus_t`): the same numbers in CUDA 12 and 13.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CublasStatus(pub c_int);

impl CublasStatus {
    /// `CUBLAS_STATUS_SUCCESS`.
    pub const SUCCESS: Self = Self(0);
    /// `CUBLAS_STATUS_NOT_INITIALIZED`.
    pub const NOT_INITIALIZED: Self = Self(1);
    /// `CUBLAS_STATUS_ALLOC_FAILED`.
    pub const ALLOC_FAILED: Self = Self(3);
    /// `CUBLAS_STATUS_INVALID_VALUE`.
    pub const INVALID_VALUE: Self = Self(7);
    /// `CUBLAS_STATUS_ARCH_MISMATCH`.
    pub const ARCH_MISMATCH: Self = Self(8);
    /// `CUBLAS_STATUS_MAPPING_ERROR`.
    pub const MAPPING_ERROR: Self = Self(11);
    /// `CUBLAS_STATUS_EXECUTION_FAILED`.
    pub const EXECUTION_FAILED: Self = Self(13);
    /// `CUBLAS_STATUS_INTERNAL_ERROR`.
    pub const INTERNAL_ERROR: Self = Self(14);
    /// `CUBLAS_STATUS_NOT_SUPPORTED`.
    pub const NOT_SUPPORTED: Self = Self(15);
    /// `CUBLAS_STATUS_LICENSE_ERROR`.
    pub const LICENSE_ERROR: Self = Self(16);

    /// cuBLAS's name for it (`CUBLAS_STATUS_ALLOC_FAILED`), or the number.
    pub fn name(self) -> String {
        let known = match self {
            Self::SUCCESS => "SUCCESS",
            Self::NOT_INITIALIZED => "NOT_INITIALIZED",
            Self::ALLOC_FAILED => "ALLOC_FAILED",
            Self::INVALID_VALUE => "INVALID_VALUE",
            Self::ARCH_MISMATCH => "ARCH_MISMATCH",
            Self::MAPPING_ERROR => "MAPPING_ERROR",
            Self::EXECUTION_FAILED => "EXECUTION_FAILED",
            Self::INTERNAL_ERROR => "INTERNAL_ERROR",
            Self::NOT_SUPPORTED => "NOT_SUPPORTED",
            Self::LICENSE_ERROR => "LICENSE_ERROR",
            Self(other) => return format!("cuBLAS status {other}"),
        };
        format!("CUBLAS_STATUS_{known}")
    }
}

impl std::fmt::Display for CublasStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// `cublasHandle_t`.
type Handle = *mut c_void;
/// `cudaDataType` values used here.
const CUDA_R_32F: c_int = 0;
const CUDA_R_16F: c_int = 2;
const CUDA_R_16BF: c_int = 14;
/// `cublasOperation_t`.
const CUBLAS_OP_N: c_int = 0;
const CUBLAS_OP_T: c_int = 1;
/// `CUBLAS_COMPUTE_32F` (`cublasComputeType_t`).
const CUBLAS_COMPUTE_32F: c_int = 68;
/// `CUBLAS_GEMM_DEFAULT` (`cublasGemmAlgo_t`).
const CUBLAS_GEMM_DEFAULT: c_int = -1;
/// `MAJOR_VERSION` .. `PATCH_LEVEL` (`libraryPropertyType`).
const LIBRARY_PROPERTIES: [c_int; 3] = [0, 1, 2];

/// `cublasGemmStridedBatchedEx`, as declared in `cublas_api.h`.
type GemmStridedBatchedEx = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    c_longlong,
    *const c_void,
    c_int,
    c_int,
    c_longlong,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_longlong,
    c_int,
    c_int,
    c_int,
) -> c_int;

/// The cuBLAS functions the backend calls, resolved in one loaded library.
pub struct CublasApi {
    create: unsafe extern "C" fn(*mut Handle) -> c_int,
    destroy: unsafe extern "C" fn(Handle) -> c_int,
    set_stream: unsafe extern "C" fn(Handle, CUstream) -> c_int,
    set_workspace: unsafe extern "C" fn(Handle, *mut c_void, usize) -> c_int,
    gemm_strided_batched_ex: GemmStridedBatchedEx,
    version: String,
    // Last: the function pointers above point into it.
    library: LoadedLibrary,
}

impl std::fmt::Debug for CublasApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CublasApi").field("version", &self.version).field("path", &self.library.path()).finish()
    }
}

impl CublasApi {
    /// Resolves the functions in `library` and reads its version.
    pub fn from_library(library: LoadedLibrary) -> std::result::Result<Self, String> {
        // SAFETY: each type is the C declaration of the function named
        // (cublas_api.h of CUDA 12 and 13); the pointers live in `Self`
        // beside the library that holds them.
        let (api, get_property) = unsafe {
            let get_property: unsafe extern "C" fn(c_int, *mut c_int) -> c_int =
                library.function("cublasGetProperty")?;
            let api = Self {
                create: library.function("cublasCreate_v2")?,
                destroy: library.function("cublasDestroy_v2")?,
                set_stream: library.function("cublasSetStream_v2")?,
                set_workspace: library.function("cublasSetWorkspace_v2")?,
                gemm_strided_batched_ex: library.function("cublasGemmStridedBatchedEx")?,
                version: String::new(),
                library,
            };
            (api, get_property)
        };
        let mut parts = Vec::new();
        for property in LIBRARY_PROPERTIES {
            let mut value: c_int = 0;
            // SAFETY: cublasGetProperty needs no handle; `value` is a local.
            let status = CublasStatus(unsafe { get_property(property, &mut value) });
            if status != CublasStatus::SUCCESS {
                return Err(format!("cublasGetProperty: {status}"));
            }
            parts.push(value.to_string());
        }
        Ok(Self { version: parts.join("."), ..api })
    }

    /// Its version, `major.minor.patch`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        self.library.path()
    }
}

/// The cuBLAS the backend uses, loaded once per process (see
/// [`crate::libraries`] for which).
pub fn api() -> std::result::Result<&'static CublasApi, MissingLibrary> {
    static API: OnceLock<std::result::Result<CublasApi, MissingLibrary>> = OnceLock::new();
    API.get_or_init(|| libraries::choose(CudaLibrary::Cublas, CublasApi::from_library)).as_ref().map_err(Clone::clone)
}

/// One handle, used by one stream at a time (the backend's lock).
pub struct Blas {
    api: &'static CublasApi,
    handle: Handle,
    _workspace: CudaBuffer,
    gpu: Arc<Gpu>,
}

// SAFETY: the handle is used under the owning backend's lock only.
unsafe impl Send for Blas {}
// SAFETY: as above.
unsafe impl Sync for Blas {}

fn check(gpu: &Gpu, what: &str, status: c_int) -> Result<()> {
    match CublasStatus(status) {
        CublasStatus::SUCCESS => Ok(()),
        other => Err(gpu.error_of(blas_error_kind(other), format!("{what}: {other}"))),
    }
}

/// What a cuBLAS status means for a host: a failed allocation is
/// [`BackendErrorKind::OutOfDeviceMemory`]; a GPU or operation cuBLAS does
/// not support [`BackendErrorKind::Unsupported`]; anything else
/// [`BackendErrorKind::Other`].
pub fn blas_error_kind(status: CublasStatus) -> BackendErrorKind {
    match status {
        CublasStatus::ALLOC_FAILED => BackendErrorKind::OutOfDeviceMemory,
        CublasStatus::ARCH_MISMATCH | CublasStatus::NOT_SUPPORTED => BackendErrorKind::Unsupported,
        _ => BackendErrorKind::Other,
    }
}

impl Blas {
    /// A handle whose work runs on `stream`. cuBLAS must be loadable (see
    /// `libraries::ensure`).
    pub fn new(gpu: &Arc<Gpu>, stream: CUstream) -> Result<Self> {
        let api = api().map_err(|e| gpu.error_of(BackendErrorKind::LibraryMissing, e.to_string()))?;
        gpu.context()?;
        let workspace = CudaBuffer::alloc(gpu, WORKSPACE_BYTES)?;
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: cuBLAS is loaded; `handle` is a local it writes.
        check(gpu, "cublasCreate", unsafe { (api.create)(&mut handle) })?;
        let me = Self { api, handle, _workspace: workspace, gpu: gpu.clone() };
        // SAFETY: a live handle and stream of the current context; the
        // workspace lives as long as the handle (same struct, dropped after it).
        unsafe {
            check(gpu, "cublasSetStream", (api.set_stream)(handle, stream))?;
            check(
                gpu,
                "cublasSetWorkspace",
                (api.set_workspace)(handle, me._workspace.device_ptr() as *mut c_void, WORKSPACE_BYTES),
            )?;
        }
        Ok(me)
    }

    /// Runs one product on the handle's stream.
    pub fn gemm(&self, g: &GemmLaunch) -> Result<()> {
        let ty = match g.ab_type {
            GemmType::F32 => CUDA_R_32F,
            GemmType::F16 => CUDA_R_16F,
            GemmType::BF16 => CUDA_R_16BF,
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the addresses are device memory of this GPU planned for
        // these shapes (checked against the tensors' sizes by the planner);
        // alpha and beta are read before the call returns.
        let status = unsafe {
            (self.api.gemm_strided_batched_ex)(
                self.handle,
                CUBLAS_OP_T,
                CUBLAS_OP_N,
                g.m,
                g.n,
                g.k,
                (&alpha as *const f32).cast(),
                g.a.0 as *const c_void,
                ty,
                g.a.1,
                g.a.2,
                g.b.0 as *const c_void,
                ty,
                g.b.1,
                g.b.2,
                (&beta as *const f32).cast(),
                g.c.0 as *mut c_void,
                CUDA_R_32F,
                g.c.1,
                g.c.2,
                g.batch,
                CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT,
            )
        };
        check(&self.gpu, "cublasGemmStridedBatchedEx", status)
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        if self.gpu.context().is_ok() {
            // SAFETY: created by cublasCreate, destroyed once.
            let _ = unsafe { (self.api.destroy)(self.handle) };
        }
    }
}
