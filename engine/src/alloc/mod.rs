//! The graph allocator: memory planning with reuse (ggml's `ggml-alloc.c`).
//!
//! - [`GraphAllocator`]: the API the scheduler and users call — `plan` (dry
//!   run, bytes per buffer type), `reserve` (plan and size the buffers),
//!   `alloc_graph` (bind every tensor to its planned offset, re-planning only
//!   when the graph changed), `needs_replan` (ask first).
//! - [`BufferTypeIndex`]: a buffer type's position in the allocator's list
//!   (what node and leaf assignments hold).
//! - [`TensorTable`]: the per-tensor facts, gathered in one pass into dense
//!   columns — by the allocator for a graph it is given, or by the
//!   scheduler, whose systems read the same table before the allocator
//!   plans it; `fingerprint`: the record of a plan's inputs that tells whether
//!   a graph needs a new plan; `planner`: the liveness walk;
//!   `chunked_allocator`: the best-fit free list of one buffer type, spread
//!   over chunks no larger than the buffer type's maximum size.
//!
//! Where this differs from ggml, and why:
//! - Graph inputs are never freed (ggml frees them after their last reader):
//!   the user, or the scheduler's pipelined input copies, may write them
//!   while other work is in flight, so nothing may ever overlap them. For
//!   the same reason a node never runs in place over an input.
//! - In-place reuse also needs the source in the node's buffer type (ggml
//!   moves the node to the source's buffer type instead).
//! - A view that nothing reads lets go of its root right after its own node,
//!   whatever its op (ggml special-cases op NONE): the scheduler's
//!   dependency views keep a source alive exactly up to their position, and
//!   an unread SET_ROWS or CPY result does not pin its destination forever.
//! - "Already allocated" means placed in a buffer this allocator does not
//!   own: tensors in its own buffers are re-bound on every call, so graphs
//!   can be built once and allocated many times.
//! - Plans are bound by position (leaf `i`, node `i`), not by tensor: a graph
//!   rebuilt from new tensors, or with another tensor at a leaf position,
//!   reuses the plan when its structure is the same.
//! - Re-planning compares a full record of the plan's inputs (per tensor:
//!   role, buffer type, flags, in-place candidates, size, source and view
//!   links), not just node counts and sizes, so a changed topology with
//!   equal counts is noticed.
//! - No fixed limits on free blocks or chunks; a tensor larger than the
//!   buffer type's maximum gets a chunk of its own (as ggml), and the buffer
//!   type decides whether it can allocate it.

mod buffer_type_index;
mod chunked_allocator;
mod fingerprint;
mod graph_allocator;
mod planner;
pub(crate) mod tensor_table;

pub use buffer_type_index::BufferTypeIndex;
pub use graph_allocator::{BufferGrowth, GraphAllocator, PlanSizes, PlannedTensor};
pub use tensor_table::TensorTable;

#[cfg(test)]
mod tests;
