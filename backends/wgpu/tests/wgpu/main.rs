//! The wgpu backend on whatever adapter this machine has (lavapipe in CI):
//! its kernels against hand-computed and ggml references, its device
//! objects as the engine sees them, and its splits under the scheduler.
//! One test binary (one link) for all of them; every test is skipped, with a
//! message, when there is no adapter.

#[macro_use]
mod support;

mod conformance;
mod device;
mod experts;
mod host_device;
mod mamba;
mod mixed_support;
mod ops;
mod plans;
mod quant;
mod read_back;
mod scheduler;
mod sequence_ops;
mod small_ops;
mod vision;
