//! The CUDA backend (feature `cuda`): NVIDIA GPUs through cudarc, every
//! CUDA library loaded at run time, so the crate builds without a CUDA
//! toolkit and a machine without a driver gets an error, never a panic.
//!
//! - [`libraries`]: finding libcuda before cudarc is asked for it (cudarc
//!   panics on a missing library), and libnvrtc and libcublas of CUDA 12 or
//!   13 (`GANTRY_NVRTC_PATH` / `GANTRY_CUBLAS_PATH`, the loader's path, the
//!   toolkits' folders and the PyPI wheels' in Python's site-packages are
//!   searched), which the backend loads and calls itself.
//! - [`platform()`] / [`CudaPlatform`]: one device per GPU, or the reason
//!   there is none (`gantry devices` prints it) and its kind
//!   ([`gantry_engine::BackendErrorKind`]: a missing driver or library).
//! - Errors: every driver, NVRTC and cuBLAS failure is an
//!   `Error::Backend` whose kind says what it means ([`driver_error_kind`],
//!   [`blas_error_kind`]).
//! - [`CudaDevice`] (`device.rs`, its shared state in `gpu.rs`): props,
//!   buffer types, `supports_op` (the planner run without memory),
//!   `offload_op` from a per-device batch size, events.
//! - [`CudaBufferType`] / [`CudaBuffer`] (`buffer.rs`): device memory;
//!   [`CudaHostBufferType`] and buffers over registered caller memory
//!   (`host_buffer.rs`).
//! - [`CudaBackend`] (`backend.rs`): a stream; graphs planned into launches
//!   (`ops/`, one file per op family; `launch.rs`), products through cuBLAS
//!   (`cublas.rs`), CUDA graphs for plans that repeat (`graphs.rs`); graph
//!   plans (`plan.rs`) captured as CUDA graphs at their first compute.
//! - [`kernels`]: the header-free CUDA C sources; [`nvrtc`]: compiling them
//!   for the device's exact architecture (PTX for one NVRTC does not know);
//!   [`kernel_cache`]: compiled images kept in memory and on disk.
//!
//! Coverage: every op of the core set in F32 and F16 (BF16 where the CPU
//! takes it); MUL_MAT of F32 / F16 / BF16 weights through cuBLAS and of
//! Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K with Q8_1 activations
//! quantized on the GPU; GET_ROWS from every quantized type but the
//! lookup types IQ4_NL, IQ4_XS and MXFP4 (no MUL_MAT or GET_ROWS of those
//! here: the scheduler keeps them on the CPU); SET_ROWS into
//! F32 / F16 / BF16; FLASH_ATTN_EXT with V heads up to 256. Not covered
//! (so `supports_op` is false and the scheduler keeps them elsewhere):
//! quantizing on the GPU (CPY / SET_ROWS from F32 into a quantized type),
//! float weights whose rows are not dense, GPUs older than compute 6.1.

mod backend;
mod buffer;
mod cublas;
mod device;
mod gpu;
pub mod graphs;
mod host_buffer;
pub mod kernel_cache;
pub mod kernels;
pub mod launch;
pub mod libraries;
pub mod nvrtc;
mod ops;
mod plan;
mod platform;

pub use backend::CudaBackend;
pub use buffer::{CudaBuffer, CudaBufferType, DEVICE_ALIGNMENT};
pub use cublas::{CublasApi, CublasStatus, blas_error_kind};
pub use device::{CudaDevice, DEFAULT_OFFLOAD_MIN_BATCH};
pub use gpu::{driver_error, driver_error_kind};
pub use host_buffer::{CudaHostBufferType, CudaMappedBufferType, HostBuffer};
pub use platform::{CudaPlatform, MIN_ARCH, init_failure_kind, missing_kind, platform};
