//! Gantry's backends: the CPU (always), wgpu (feature `wgpu`), and the
//! conformance suite every backend is checked with.

pub mod conformance;
pub mod cpu;
pub mod device_state;
mod registry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use registry::default_registry;
