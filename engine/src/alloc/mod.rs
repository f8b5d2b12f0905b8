//! The graph allocator: memory planning with reuse (ggml's `ggml-alloc.c`).
//!
//! - [`GraphAllocator`]: the API the scheduler and users call — `plan` (dry
//!   run, bytes per buffer type), `reserve` (plan and size the buffers),
//!   `alloc_graph` (bind every tensor to its planned offset, re-planning only
//!   when the graph changed).
//! - `tensor_table`: the per-tensor facts, gathered in one pass into dense
//!   columns; `fingerprint`: the record of a plan's inputs that tells whether
//!   a graph needs a new plan; `planner`: the liveness walk;
//!   `chunked_allocator`: the best-fit free list of one buffer type, spread
//!   over chunks no larger than the buffer type's maximum size.

mod chunked_allocator;
mod fingerprint;
mod graph_allocator;
mod planner;
mod tensor_table;

pub use graph_allocator::{GraphAllocator, PlanSizes, PlannedTensor};

#[cfg(test)]
mod tests;
