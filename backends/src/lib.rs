//! Gantry's backends: the CPU (always), wgpu (feature `wgpu`), and the
//! conformance suite every backend is checked with.

pub mod conformance;
pub mod cpu;
mod registry;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use registry::default_registry;
