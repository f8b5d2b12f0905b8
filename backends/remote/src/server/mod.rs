//! The server behind `gantry rpc-server`: the network side (`listener`,
//! with `stream_io` for the bytes arriving on a stream), one client's state
//! and what each request does (`session`), what every session shares
//! (`shared`: the memory cap of `memory_cap`, the compute turns and deadline
//! of `compute_gate`), the checks and rebuild of a client's graph
//! (`graph_build`), and the weights it holds for clients to bind by digest
//! (`weight_cache`).

mod compute_gate;
mod graph_build;
mod listener;
mod memory_cap;
mod session;
mod shared;
mod stream_io;
mod weight_cache;

pub use graph_build::{BuildMode, BuiltGraph, build_graph};
pub use listener::{ListenConfig, RunningServer};
pub use session::{ServedDevice, ServerState, Session, device_type_code};
pub use shared::ServerUsage;
pub use weight_cache::WeightCache;
