//! Everything that calls wgpu. Its API changes with each major version, so
//! the rest of the backend sees only these types: adapters and their facts,
//! an opened [`Gpu`] (from an adapter Gantry found, or a host's own device),
//! [`GpuBuffer`]s and the [`TensorStorage`] a host binds, compiled
//! [`Pipeline`]s and the [`Recorder`] that turns a graph's dispatches into
//! one submission.

mod adapter;
mod bindings;
mod context;
mod host;
mod memory;
mod pipeline;
mod read_back;
mod recorder;
mod tensor_storage;

pub use adapter::{AdapterFacts, AdapterKind, FoundAdapter, GpuLimits, LimitShortfall, find_adapters};
pub use bindings::{PARAMS_SIZE, STORAGE_SLOTS};
pub use context::{Gpu, GpuOwner, Submission};
pub use memory::GpuBuffer;
pub use pipeline::Pipeline;
pub use read_back::GpuReadBack;
pub use recorder::Recorder;
pub use tensor_storage::TensorStorage;
