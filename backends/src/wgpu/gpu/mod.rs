//! Everything that calls wgpu. Its API changes with each major version, so
//! the rest of the backend sees only these types: adapters and their facts,
//! an opened [`Gpu`], [`GpuBuffer`]s, compiled [`Pipeline`]s and the
//! [`Recorder`] that turns a graph's dispatches into one submission.

mod adapter;
mod bindings;
mod context;
mod memory;
mod pipeline;
mod recorder;

pub use adapter::{AdapterFacts, AdapterKind, FoundAdapter, GpuLimits, find_adapters};
pub use bindings::{PARAMS_SIZE, STORAGE_SLOTS};
pub use context::{Gpu, Submission};
pub use memory::GpuBuffer;
pub use pipeline::Pipeline;
pub use recorder::Recorder;
