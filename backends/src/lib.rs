//! Gantry's backends.

#[cfg(feature = "wgpu")]
pub mod wgpu;
