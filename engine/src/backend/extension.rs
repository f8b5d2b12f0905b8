//! Typed platform extensions (ggml's `get_proc_address`, with types).
//!
//! A platform exposes optional features as values of these types through
//! [`crate::Platform::extension`]; callers ask for one with
//! [`crate::platform_extension`].

use std::sync::Arc;

use crate::{Backend, Result};

/// Sets the number of threads a backend computes with.
#[derive(Clone, Copy)]
pub struct SetThreadCount(pub fn(&dyn Backend, usize) -> Result<()>);

/// A callback polled between nodes; returning `true` aborts the compute.
pub type AbortCallback = Arc<dyn Fn() -> bool + Send + Sync>;

/// Installs (or removes, with `None`) a backend's abort callback.
#[derive(Clone, Copy)]
pub struct SetAbortCallback(pub fn(&dyn Backend, Option<AbortCallback>) -> Result<()>);
