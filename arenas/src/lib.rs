//! Handle tables and bump arenas: the storage layer of Gantry, with no math.
//!
//! - [`keys`]: the slotmap key types every table is indexed by. A key is a
//!   generational index, so a stale key is detected instead of dangling.
//! - [`GraphArena`]: a bump arena from which graphs allocate their node and
//!   leaf lists and per-graph scratch; `reset` keeps the memory for the next
//!   build, so rebuilding the same graph allocates nothing.
//! - [`Column`] and [`BitSet`]: dense struct-of-arrays component storage
//!   indexed by node position.

// No raw memory here: maps, SIMD and FFI live in the backends.
#![deny(unsafe_code)]

mod bitset;
mod column;
mod graph_arena;
pub mod keys;

pub use bitset::BitSet;
pub use column::Column;
pub use graph_arena::GraphArena;
pub use keys::{BufferId, DeviceId, EventId, PlanId, TensorId};

/// Re-exported so that downstream crates name the same slotmap version.
pub use slotmap;
