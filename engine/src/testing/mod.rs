//! Helpers for tests and benches across the workspace: buffer types that
//! need no backend, and a llama-shaped graph with SmolLM2's shapes.
//!
//! Not part of the stable API.

mod buffer_types;
pub mod devices;
pub mod llama;

pub use buffer_types::{HostBufferType, VirtualBufferType};
pub use llama::{LlamaGraph, LlamaLayer, LlamaModel, LlamaShape};
