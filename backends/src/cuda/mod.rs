//! The CUDA backend (feature `cuda`).
pub mod kernel_cache;
pub mod kernels;
pub mod libraries;
pub mod nvrtc;
