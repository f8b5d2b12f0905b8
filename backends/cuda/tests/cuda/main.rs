//! The CUDA backend: every kernel compiled by NVRTC (no GPU needed), the
//! contract without a driver (errors, never a panic), and the conformance
//! suite on a GPU when there is one (skipped, saying why, when not).

mod conformance;
mod driverless;
mod kernels_compile;
