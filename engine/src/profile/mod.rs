//! Where the time goes: an optional [`Profiler`] installed on a scheduler
//! ([`crate::sched::Scheduler::set_profiler`]) and through it on every
//! backend ([`crate::Backend::set_profiler`]) records a [`Slice`] per split,
//! input copy and event wait (the scheduler), per node (the CPU backend's
//! node loop) and per task a node's work was split into (the CPU backend's
//! worker threads), into a buffer allocated once. Backends that do not time
//! their own nodes (the GPU backends) show as one slice per split, the
//! scheduler waiting for the split to finish while a profiler is installed.
//!
//! Without a profiler nothing is timed or recorded: each place that could
//! record tests one `Option`.
//!
//! The slices are plain data ([`Profiler::drain`]); [`summarize_ops`] turns
//! them into time per op kind, and [`node_cost`] says how many bytes and
//! floating-point operations a node is worth.

mod cost;
mod profiler;
mod slice;
mod summary;

pub use cost::node_cost;
pub use profiler::{BackendProfiler, Profiler, ThreadName};
pub use slice::{Slice, SliceKind};
pub use summary::{OpSummary, summarize_ops};
