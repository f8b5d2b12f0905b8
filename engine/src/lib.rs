//! Gantry's engine: dtypes, tensors, ops, graphs, the backend traits, the
//! graph allocator and the scheduler.
//!
//! Everything is data in tables keyed by handles (see `gantry-arenas`): a
//! [`Context`] holds tensor descriptions, placements and buffers; graphs are
//! node lists in a [`GraphArena`]; backends are trait objects that compute a
//! graph over a context.
//!
//! The map:
//! - data: `dtype` ([`DType`]: ggml's types, block formats bit-exact),
//!   [`quant`] (reference quantizers and dequantizers of the block types),
//!   [`convert`] (f32 to and from every dtype), [`tensor`] ([`TensorDesc`]:
//!   a tensor's description — the component every system reads);
//! - the tables: `context` ([`Context`]: tensors, buffers, placements, tensor
//!   data), `graph` ([`Graph`]: node, leaf and output lists in an arena);
//! - ops: `op` ([`Op`], the op set) and [`ops`] (the builders with shape
//!   inference, one file per op family: `ctx.mul_mat`, `ctx.rope`, ...);
//! - [`backend`]: the traits a backend implements — [`BufferType`],
//!   [`Buffer`], [`Backend`] (a stream, with graph plans: [`GraphPlan`],
//!   [`PlanTable`]), [`Device`], [`Platform`] — and the [`Registry`] of
//!   platforms and devices, events, extensions, multi-buffers
//!   ([`MultiBuffer`]) and copies between backends ([`tensor_copy_async`]);
//! - [`alloc`]: the graph allocator ([`GraphAllocator`]: memory planning with
//!   reuse, ggml-alloc);
//! - [`sched`]: the multi-backend scheduler ([`sched::Scheduler`]: assign,
//!   expand, split, alloc, compute);
//! - [`profile`]: the optional recorder of splits, copies, nodes and
//!   tasks ([`profile::Profiler`]) and its summary per op kind;
//! - [`sync`]: the locks and atomics shared state is built from (`std`, or
//!   loom under `--cfg loom`); [`device_state`]: the small thread-shared
//!   types GPU backends keep their device state in (events, caches,
//!   counters, staging slots), model-checked with loom; [`SplitMix64`]: the one seeded generator;
//! - [`Limits`]: the bounds every reader of untrusted input checks sizes
//!   against (loaders, the remote server);
//! - `testing` (feature `testing`): fixtures for tests and benches.

pub mod alloc;
pub mod backend;
mod context;
pub mod convert;
pub mod device_state;
mod dtype;
mod error;
mod graph;
mod limits;
mod op;
pub mod ops;
pub mod profile;
pub mod quant;
mod rng;
pub mod sched;
mod small_file;
pub mod sync;
pub mod tensor;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use alloc::{GraphAllocator, PlanSizes, PlannedTensor};
pub use backend::*;
pub use context::{BufferEntry, Context, Mark, Placement, TensorBuffers};
pub use dtype::{DType, DTypeInfo, QK_K};
pub use error::{BackendErrorKind, Error, Result};
pub use gantry_arenas::{BufferId, DeviceId, EventId, GraphArena, PlanId, TensorId};
pub use graph::Graph;
pub use limits::Limits;
pub use op::{BinaryOp, ConvParams, GluOp, Op, PoolOp, RopeMode, RopeParams, ScaleMode, SortOrder, TriType, UnaryOp};
pub use rng::SplitMix64;
pub use small_file::read_small_file;
pub use tensor::{MAX_DIMS, MAX_SRC, Name, TensorDesc, TensorFlags, TensorLayout};
