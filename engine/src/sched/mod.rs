//! The multi-backend scheduler: ggml's `ggml_backend_sched` as a sequence of
//! systems over component tables.
//!
//! 1. [`assign`] — pre-allocated tensors, graph inputs, pins, weight readers;
//! 2. [`expand`] — spread assignments until every node has a backend;
//!    [`in_place`] — nodes computed in place run where their memory is;
//! 3. [`split`] — cut into per-backend splits with input copies;
//! 4. alloc — plan memory over every backend's buffer type;
//! 5. [`compute`] — copy inputs, run each split, record events.
//!
//! The same graph placed again in a context nothing changed since keeps its
//! placement ([`reuse`]): steps 1 to 4 run once per graph, not once per compute.

pub mod assign;
pub mod backend_set;
pub mod compute;
pub mod debug;
pub mod dot;
pub mod expand;
pub mod graph_copy;
pub mod in_place;
pub mod passes;
pub mod pipeline;
pub mod reuse;
mod scheduler;
pub mod split;
pub mod tables;

#[cfg(test)]
mod tests;

pub use backend_set::{BackendSet, MAX_BACKENDS};
pub use compute::EvalCallback;
pub use graph_copy::{GraphCopy, compare_backends, graph_copy};
pub use scheduler::{MAX_COPIES, Scheduler, SchedulerParams};
pub use split::{Split, SplitParams};
pub use tables::Cause;
