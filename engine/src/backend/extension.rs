//! Typed platform extensions (ggml's `get_proc_address`, with types).
//!
//! A platform exposes optional features as values of these types through
//! [`crate::Platform::extension`] (and its devices through
//! [`crate::Device::extension`]); callers ask for one with
//! [`crate::platform_extension`] or [`crate::device_extension`].

use std::sync::Arc;

use crate::{Backend, BufferType, Result, TensorLayout};

/// Sets the number of threads a backend computes with.
#[derive(Clone, Copy)]
pub struct SetThreadCount(pub fn(&dyn Backend, usize) -> Result<()>);

/// A callback polled between nodes; returning `true` aborts the compute.
pub type AbortCallback = Arc<dyn Fn() -> bool + Send + Sync>;

/// Installs (or removes, with `None`) a backend's abort callback.
#[derive(Clone, Copy)]
pub struct SetAbortCallback(pub fn(&dyn Backend, Option<AbortCallback>) -> Result<()>);

/// A device's repacked layout for weight matrices (ggml's extra buffer
/// types, such as the CPU's `CPU_REPACK`): a loader places the weights
/// whose layout `repacks` accepts in a buffer of `buffer_type`, which keeps
/// them in the layout the device's kernels read (reading them back gives
/// the bytes written).
#[derive(Clone, Copy)]
pub struct WeightRepack {
    /// Whether a weight of this layout has a repacked form.
    pub repacks: fn(&TensorLayout) -> bool,
    /// The buffer type that repacks the weights written into it.
    pub buffer_type: fn() -> Arc<dyn BufferType>,
}
