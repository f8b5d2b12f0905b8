//! The protocol between a client's `remote` devices and `gantry rpc-server`:
//! a versioned binary format with a typed schema, decoded with a bounded
//! reader (`codec`), validated field by field (`graph`, `message`).
//!
//! - A connection starts with [`Request::Hello`] carrying
//!   [`PROTOCOL_VERSION`]; any other first request, or another version, is
//!   answered with [`Response::Error`]. TLS negotiates [`ALPN`] first.
//! - Every later request is one QUIC stream: the request message, raw bytes
//!   for a write, then the response message, raw bytes for a read. Streams
//!   are independent, so a large transfer never blocks a small call.
//! - Limits ([`Limits`]) bound every message, list and tensor.

mod codec;
mod digest;
mod graph;
mod limits;
mod message;

pub use codec::{Reader, WireError, Writer};
pub use digest::{content_digest, graph_digest};
pub use graph::{MIN_TENSOR_BYTES, WireGraph, WireLocation, WireTensor, dtype_code, dtype_of};
pub use limits::{Limits, UNCOUNTED_STREAM_BYTES};
pub use message::{DIGEST_BYTES, Request, Response, WireDevice};

/// The protocol version; client and server must speak the same one.
/// 2: five sources per tensor (FLASH_ATTN_EXT's attention sinks) and the
/// mixture-of-experts and routing ops.
pub const PROTOCOL_VERSION: u32 = 2;

/// The TLS application protocol (ALPN) of Gantry's RPC.
pub const ALPN: &[u8] = b"gantry-rpc/1";
