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
pub mod convert;
mod dtype;
mod error;
mod graph;
mod op;
pub mod ops;
pub mod quant;
mod rng;
pub mod sync;
pub mod tensor;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use alloc::{GraphAllocator, PlanSizes, PlannedTensor};
pub use backend::*;
pub use context::{BufferEntry, Context, Mark, Placement, TensorBuffers};
pub use dtype::{DType, DTypeInfo, QK_K};
pub use error::{Error, Result};
pub use gantry_arenas::{BufferId, DeviceId, EventId, GraphArena, TensorId};
pub use graph::Graph;
pub use op::{BinaryOp, GluOp, Op, RopeMode, RopeParams, UnaryOp};
pub use rng::SplitMix64;
pub use tensor::{MAX_DIMS, MAX_SRC, Name, TensorDesc, TensorFlags};
pub mod sched;
