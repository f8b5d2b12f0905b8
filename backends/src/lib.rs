//! Gantry's backends: the CPU (always), wgpu (feature `wgpu`), CUDA
//! (feature `cuda`), remote devices (feature `remote`), and the conformance
//! suite every backend is checked with.
//!
//! - [`cpu`]: the CPU backend (kernels in `cpu/ops`, vector primitives in
//!   `cpu/simd`, the F16/F32 mat-vec in `cpu/float_matvec.rs`, quantized
//!   kernels in `cpu/quant`, instruction-set paths in `cpu/isa.rs`).
//! - `wgpu` (feature `wgpu`): the wgpu backend (WGSL kernels in
//!   `wgpu/shaders`, their plans and composition in `wgpu/kernels`).
//! - `cuda` (feature `cuda`): the CUDA backend (CUDA C kernels in
//!   `cuda/kernels`, compiled by NVRTC at run time; their launch plans in
//!   `cuda/ops`).
//! - [`conformance`]: the suite every backend passes, with an f64 reference.
//! - [`device_state`]: the state a device shares between threads (events,
//!   caches, counters), as small generic types the wgpu backend keeps its
//!   state in, model-checked with loom.
//! - `remote` (feature `remote`): devices on other machines over QUIC with
//!   mutual TLS — the client platform, the server behind `gantry
//!   rpc-server`, the wire protocol, certificates.
//! - `testing` (feature `testing`): the test GPU platform, loopback
//!   `rpc-server`s with certificates made at test time
//!   (`testing::loopback`, with `remote`), and the fuzz cases of the
//!   scheduler (`testing::sched_fuzz`, with `arbitrary`) and of the remote
//!   server (`testing::remote_fuzz`, with `arbitrary` and `remote`).
//! - [`default_registry`]: every platform compiled in and found on this
//!   machine, with the servers `GANTRY_REMOTE` names; [`local_registry`]:
//!   this machine's only (what `gantry rpc-server` serves from).

pub mod conformance;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device_state;
mod registry;
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(feature = "wgpu")]
pub mod wgpu;

#[cfg(feature = "remote")]
pub use registry::registry_with_remote;
pub use registry::{default_registry, local_registry};
