//! The client side: the `remote` platform and its devices, buffer types,
//! buffers and backends, each implementing the engine's trait by calls over
//! a [`Link`] to one server (`link`); splits and op queries described for
//! the server (`encode`); where the servers are (`config`).

mod backend;
mod buffer;
mod config;
mod device;
mod encode;
mod link;
mod platform;

pub use backend::RemoteBackend;
pub use buffer::{RemoteBuffer, RemoteBufferType};
pub use config::{RemoteConfig, parse_servers};
pub use device::RemoteDevice;
pub use encode::{encode_query, encode_split};
pub use link::{CallTimeouts, Link, Welcome, WireBytes};
pub use platform::{RemotePlatform, WireStats};
