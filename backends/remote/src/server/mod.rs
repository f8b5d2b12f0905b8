//! The server behind `gantry rpc-server`: the network side (`listener`),
//! one client's state and what each request does (`session`), the checks
//! and rebuild of a client's graph (`graph_build`), and the weights it holds
//! for clients to bind by digest (`weight_cache`).

mod graph_build;
mod listener;
mod session;
mod weight_cache;

pub use graph_build::{BuildMode, BuiltGraph, build_graph};
pub use listener::{ListenConfig, RunningServer};
pub use session::{ServedDevice, ServerState, Session, device_type_code};
pub use weight_cache::WeightCache;
