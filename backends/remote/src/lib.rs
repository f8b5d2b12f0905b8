//! Devices on other machines (feature `remote`): `gantry rpc-server` exposes
//! a machine's devices over QUIC with mutual TLS, and the `remote` platform
//! makes each of them a device here, so the scheduler places a graph over
//! them like over any other.
//!
//! - [`wire`]: the protocol — a versioned binary format with a typed schema,
//!   decoded with bounds on every length, one request per QUIC stream.
//! - [`server`]: the session per client, which rebuilds every graph with the
//!   engine's op builders before anything runs (`server::build_graph`), the
//!   network listener, and the weight cache (tensors of model files on the
//!   server's disk, named by SHA-256).
//! - [`client`]: [`RemotePlatform`], [`RemoteDevice`], [`RemoteBufferType`],
//!   [`RemoteBuffer`], [`RemoteBackend`] — the engine's traits as calls,
//!   each bounded by a timeout.
//! - [`tls`]: rustls (ring only) configurations for both ends; [`certs`]:
//!   making an authority and its server and client certificates (rcgen).
//!
//! Security model: only clients holding a certificate signed by the
//! server's `--client-ca` get past the TLS handshake; servers must present a
//! certificate of the client's authority naming the host dialled. An
//! authenticated client can use the served devices' memory and compute
//! within the server's limits (`--max-memory` across all clients, a
//! `--compute-timeout` per compute, deadlines on handshakes and streams;
//! docs/remote.md, "The server's limits"), and never memory outside its own
//! buffers: every message is decoded against the schema and checked
//! (handles, ranges, shapes, strides whose elements lie apart, the op rules
//! of each node) first, and a bad one gets an error reply.
//!
//! ```no_run
//! use gantry_remote::{RemoteConfig, RemotePlatform};
//! use gantry_engine::Platform;
//! let config = RemoteConfig::from_env()?.expect("GANTRY_REMOTE is set");
//! let platform = RemotePlatform::connect(&config)?;
//! for d in platform.devices() {
//!     println!("{}: {}", d.name(), d.description());
//! }
//! # Ok::<(), gantry_engine::Error>(())
//! ```

pub mod certs;
pub mod client;
pub mod server;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;
pub mod wire;

pub use client::{
    RemoteBackend, RemoteBuffer, RemoteBufferType, RemoteConfig, RemoteDevice, RemotePlatform, WireBytes, WireStats,
};
