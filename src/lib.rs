//! Gantry: one tensor compute graph across every device a machine has.
//!
//! This facade re-exports the engine (tensors, ops, graphs, backend traits)
//! and the backends crate as [`backends`].

pub use gantry_backends as backends;
pub use gantry_engine::*;
