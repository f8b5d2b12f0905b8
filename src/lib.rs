//! Gantry: one tensor compute graph across every device a machine has.
pub use gantry_engine::*;

pub mod model;
