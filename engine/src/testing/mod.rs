//! Helpers for tests and benches across the workspace: buffer types that
//! need no backend, a llama-shaped graph with SmolLM2's shapes, and an
//! allocation-counting global allocator.
//!
//! Not part of the stable API.

mod buffer_types;
mod counting_alloc;
pub mod devices;
pub mod llama;

pub use buffer_types::{HostBufferType, VirtualBufferType};
pub use counting_alloc::CountingAllocator;
pub use llama::{LlamaGraph, LlamaLayer, LlamaModel, LlamaShape};
