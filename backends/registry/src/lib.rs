//! Gantry's backends in one place: each backend is a crate of its own, and
//! this thin crate re-exports those compiled in and registers them.
//!
//! - [`cpu`] (`gantry-cpu`, always): the CPU backend.
//! - `wgpu` (`gantry-wgpu`, feature `wgpu`): any GPU through wgpu.
//! - `cuda` (`gantry-cuda`, feature `cuda`): NVIDIA GPUs through cudarc,
//!   kernels compiled by NVRTC at run time.
//! - `remote` (`gantry-remote`, feature `remote`): devices on other machines
//!   over QUIC with mutual TLS.
//! - `testing` (`gantry-testing`, feature `testing`): test fixtures.
//! - [`default_registry`]: every platform compiled in and found on this
//!   machine, with the servers `GANTRY_REMOTE` names; [`local_registry`]:
//!   this machine's only (what `gantry rpc-server` serves from).
//!
//! Backends meet only through the engine's traits: none of these crates
//! depends on another backend's.

mod registry;

pub use gantry_cpu as cpu;
#[cfg(feature = "cuda")]
pub use gantry_cuda as cuda;
/// The state a GPU device shares between threads (the engine's module).
pub use gantry_engine::device_state;
#[cfg(feature = "remote")]
pub use gantry_remote as remote;
#[cfg(feature = "testing")]
pub use gantry_testing as testing;
#[cfg(feature = "wgpu")]
pub use gantry_wgpu as wgpu;

#[cfg(feature = "remote")]
pub use registry::registry_with_remote;
pub use registry::{default_registry, local_registry};
