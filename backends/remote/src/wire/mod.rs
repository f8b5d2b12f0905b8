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
mod message;

pub use codec::{Reader, WireError, Writer};
pub use digest::{content_digest, graph_digest};
pub use graph::{MIN_TENSOR_BYTES, WireGraph, WireLocation, WireTensor, dtype_code, dtype_of};
pub use message::{DIGEST_BYTES, Request, Response, WireDevice};

/// The protocol version; client and server must speak the same one.
pub const PROTOCOL_VERSION: u32 = 1;

/// The TLS application protocol (ALPN) of Gantry's RPC.
pub const ALPN: &[u8] = b"gantry-rpc/1";

/// Bounds on what a peer may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest message (not counting a write's or read's raw bytes).
    pub max_message_bytes: usize,
    /// Most tensors in one graph.
    pub max_graph_tensors: usize,
    /// Most elements of one tensor.
    pub max_tensor_elements: u64,
    /// Most buffers one client may hold on a server.
    pub max_buffers: usize,
    /// Bytes moved per step of a write or read (what a transfer holds in
    /// memory at once, besides the buffer itself).
    pub chunk_bytes: usize,
    /// Graphs a server keeps per client for computing again by digest.
    pub kept_graphs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_bytes: 16 << 20,
            max_graph_tensors: 1 << 16,
            max_tensor_elements: 1 << 36,
            max_buffers: 1 << 16,
            chunk_bytes: 1 << 20,
            kept_graphs: 8,
        }
    }
}
