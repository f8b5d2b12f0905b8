//! Gantry: one tensor compute graph across every device a machine has.
//!
//! This crate is the facade: it re-exports the engine (`gantry_engine`:
//! tensors, ops, graphs, backend traits, allocator, scheduler) and the
//! backends (`gantry_backends`), and adds the model layer (GGUF, tokenizer,
//! llama-family graphs) behind the `gantry` CLI.

mod error;
pub mod model;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{Error, Result};

/// `Registry::with_defaults()`: a registry with every platform compiled in
/// and found on this machine (the CPU, and wgpu with its feature).
///
/// ```
/// use gantry::{Registry, RegistryDefaults};
/// let registry = Registry::with_defaults()?;
/// assert!(registry.find_device("cpu").is_some());
/// # Ok::<(), gantry::Error>(())
/// ```
pub trait RegistryDefaults: Sized {
    /// The default registry.
    fn with_defaults() -> Result<Self>;
}

impl RegistryDefaults for Registry {
    fn with_defaults() -> Result<Self> {
        Ok(gantry_backends::default_registry()?)
    }
}
pub use gantry_backends as backends;
/// The engine crate itself (its `Error` and `Result` are shadowed here by the facade's).
pub use gantry_engine as engine;
pub use gantry_engine::*;
