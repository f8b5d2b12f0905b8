//! Gantry's engine: dtypes, tensors, ops, graphs, the backend traits, the
//! graph allocator and the scheduler.
//!
//! Everything is data in tables keyed by handles (see `gantry-arenas`): a
//! [`Context`] holds tensor descriptions, placements and buffers; graphs are
//! node lists in a [`gantry_arenas::GraphArena`]; backends are trait objects
//! that compute a graph over a context.

pub mod alloc;
pub mod backend;
mod context;
mod context_alloc;
pub mod convert;
mod dtype;
mod error;
mod graph;
mod op;
pub mod ops;
pub mod quant;
pub mod sync;
pub mod tensor;
#[cfg(test)]
mod test_buffer;
#[doc(hidden)]
pub mod testing;

pub use alloc::{GraphAllocator, PlanSizes, PlannedTensor};
pub use backend::*;
pub use context::{BufferEntry, Context, Mark, Placement};
pub use context_alloc::TensorBuffers;
pub use dtype::{DType, DTypeInfo, QK_K};
pub use error::{Error, Result};
pub use gantry_arenas::{BufferId, DeviceId, EventId, GraphArena, TensorId};
pub use graph::Graph;
pub use op::{BinaryOp, GluOp, Op, RopeMode, RopeParams, UnaryOp};
pub use tensor::{MAX_DIMS, MAX_SRC, Name, TensorDesc, TensorFlags};
pub mod sched;
