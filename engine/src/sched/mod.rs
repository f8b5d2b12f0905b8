//! The multi-backend scheduler: ggml's `ggml_backend_sched` as a sequence of
//! systems over component tables.
//!
//! A [`Scheduler`] runs six systems, each a plain function over the tables
//! in [`tables`] (ggml's pass numbers in brackets):
//!
//! 1. [`assign`] — backends that follow from memory: pins, pre-allocated
//!    tensors, graph inputs, nodes reading weights [ggml pass 1];
//! 2. [`expand`] — spread those choices until every tensor has a backend;
//!    nodes computed in place run where their memory is [passes 2–4; the
//!    in-place step is Gantry's own];
//! 3. [`split`] — cut the node list into per-backend splits with input
//!    copies [pass 5];
//! 4. [`optimize`] — each backend rewrites its splits: moves nodes within a
//!    split, marks fused groups, adds allocation-order edges for what a
//!    group still reads [ggml's `graph_optimize` hook];
//! 5. [`alloc`] — plan and bind memory over every backend's buffer type with
//!    the graph allocator; rotate pipeline copies;
//! 6. [`compute`] — copy inputs in, run each split (from its backend's
//!    graph plan once the placement is computed again: [`plans`]), record
//!    events ([`pipeline`]), call the eval callback.
//!
//! [`placement`] runs the first four in order. The same graph placed again
//! in a context nothing changed since keeps its placement ([`reuse`]): the
//! first five systems run once per graph, not once per compute.
//!
//! Around them: [`BackendSet`] (the backends in priority order, each a
//! [`BackendIndex`]), [`budget`] (memory budgets per device, checked by the
//! alloc system before anything grows), [`Cause`] (why a tensor has its backend),
//! [`profiled`] (the scheduler's side of a [`crate::profile::Profiler`]),
//! [`describe`] (`GANTRY_SCHED_DEBUG`), [`graphviz`] (`Scheduler::to_dot`),
//! and [`graph_copy`](mod@graph_copy) (ggml's graph copy and backend comparison).

pub mod alloc;
pub mod assign;
mod backend_index;
mod backend_set;
pub mod budget;
mod cause;
pub mod compute;
pub mod describe;
pub mod expand;
pub mod expert_copy;
pub mod gathered;
pub mod graph_copy;
pub mod graphviz;
pub mod optimize;
pub mod pipeline;
pub mod placement;
pub mod plans;
pub mod profiled;
pub mod reuse;
mod scheduler;
pub mod split;
pub mod tables;

#[cfg(test)]
mod tests;

pub use backend_index::{BackendIndex, MAX_BACKENDS};
pub use backend_set::BackendSet;
pub use budget::{BackendMemory, MemoryReport};
pub use cause::Cause;
pub use compute::EvalCallback;
pub use graph_copy::{GraphCopy, compare_backends, graph_copy};
pub use optimize::{FusedGroup, FusionKind, SplitRewrite};
pub use scheduler::{MAX_COPIES, Scheduler, SchedulerParams};
pub use split::{Split, SplitParams};
