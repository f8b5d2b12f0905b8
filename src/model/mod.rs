//! The model layer: llama-family graphs over the engine.

pub mod llama;
