//! Gantry: one tensor compute graph across every device a machine has.
//!
//! This crate is the facade: it re-exports the engine (`gantry_engine`:
//! tensors, ops, graphs, backend traits, allocator, scheduler) and the
//! backends (`gantry_backends`), and adds the model layer (GGUF, tokenizer,
//! llama-family graphs) behind the `gantry` CLI.

mod error;
pub mod model;

pub use error::{Error, Result};
pub use gantry_backends as backends;
pub use gantry_engine::*;
