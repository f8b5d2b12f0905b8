//! A cuBLAS handle bound to one backend's stream, with its own workspace
//! (so products can be captured into CUDA graphs without cuBLAS allocating
//! during the capture), running the plan's [`GemmLaunch`]es.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::sys as blas;
use cudarc::driver::sys::CUstream;
use gantry_engine::{BackendErrorKind, Result};

use super::buffer::CudaBuffer;
use super::gpu::Gpu;
use super::launch::{GemmLaunch, GemmType};

/// cuBLAS's recommended workspace on Hopper (enough for every earlier GPU).
const WORKSPACE_BYTES: usize = 32 << 20;

/// One handle, used by one stream at a time (the backend's lock).
pub struct Blas {
    handle: blas::cublasHandle_t,
    _workspace: CudaBuffer,
    gpu: Arc<Gpu>,
}

// SAFETY: the handle is used under the owning backend's lock only.
unsafe impl Send for Blas {}
// SAFETY: as above.
unsafe impl Sync for Blas {}

fn check(gpu: &Gpu, what: &str, status: blas::cublasStatus_t) -> Result<()> {
    match status {
        blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
        other => Err(gpu.error_of(blas_error_kind(other), format!("{what}: {other:?}"))),
    }
}

/// What a cuBLAS status means for a host: a failed allocation is
/// [`BackendErrorKind::OutOfDeviceMemory`]; a GPU or operation cuBLAS does
/// not support [`BackendErrorKind::Unsupported`]; anything else
/// [`BackendErrorKind::Other`].
pub fn blas_error_kind(status: blas::cublasStatus_t) -> BackendErrorKind {
    use blas::cublasStatus_t as S;
    match status {
        S::CUBLAS_STATUS_ALLOC_FAILED => BackendErrorKind::OutOfDeviceMemory,
        S::CUBLAS_STATUS_ARCH_MISMATCH | S::CUBLAS_STATUS_NOT_SUPPORTED => BackendErrorKind::Unsupported,
        _ => BackendErrorKind::Other,
    }
}

impl Blas {
    /// A handle whose work runs on `stream`. cuBLAS must be loadable (see
    /// `libraries::ensure`).
    pub fn new(gpu: &Arc<Gpu>, stream: CUstream) -> Result<Self> {
        gpu.context()?;
        let workspace = CudaBuffer::alloc(gpu, WORKSPACE_BYTES)?;
        let mut handle: blas::cublasHandle_t = std::ptr::null_mut();
        // SAFETY: cuBLAS is loaded; `handle` is a local it writes.
        check(gpu, "cublasCreate", unsafe { blas::cublasCreate_v2(&mut handle) })?;
        let me = Self { handle, _workspace: workspace, gpu: gpu.clone() };
        // SAFETY: a live handle and stream of the current context; the
        // workspace lives as long as the handle (same struct, dropped after it).
        unsafe {
            check(gpu, "cublasSetStream", blas::cublasSetStream_v2(handle, stream.cast()))?;
            check(
                gpu,
                "cublasSetWorkspace",
                blas::cublasSetWorkspace_v2(handle, me._workspace.device_ptr() as *mut c_void, WORKSPACE_BYTES),
            )?;
        }
        Ok(me)
    }

    /// Runs one product on the handle's stream.
    pub fn gemm(&self, g: &GemmLaunch) -> Result<()> {
        let ty = match g.ab_type {
            GemmType::F32 => blas::cudaDataType::CUDA_R_32F,
            GemmType::F16 => blas::cudaDataType::CUDA_R_16F,
            GemmType::BF16 => blas::cudaDataType::CUDA_R_16BF,
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the addresses are device memory of this GPU planned for
        // these shapes (checked against the tensors' sizes by the planner);
        // alpha and beta are read before the call returns.
        let status = unsafe {
            blas::cublasGemmStridedBatchedEx(
                self.handle,
                blas::cublasOperation_t::CUBLAS_OP_T,
                blas::cublasOperation_t::CUBLAS_OP_N,
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
                blas::cudaDataType::CUDA_R_32F,
                g.c.1,
                g.c.2,
                g.batch,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        check(&self.gpu, "cublasGemmStridedBatchedEx", status)
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        if self.gpu.context().is_ok() {
            // SAFETY: created by cublasCreate, destroyed once.
            let _ = unsafe { blas::cublasDestroy_v2(self.handle) };
        }
    }
}
