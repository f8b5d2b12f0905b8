//! Bounds on what a peer may ask for and hold: sizes of messages, graphs
//! and tensors, and (on a server) how long each step may take and how much
//! memory every client together may hold.
//!
//! Shapes are bounded as every other reader of untrusted input bounds them,
//! through [`gantry_engine::Limits`] ([`Limits::shapes`]): a zero dimension
//! counts as one, so an empty tensor cannot hide a huge dimension.

use std::time::Duration;

/// Bytes of each server stream not counted against
/// [`Limits::max_stream_memory`]: more than any small request needs (hello,
/// freeing a buffer, a graph of a few nodes). With quinn's 100 streams at
/// once per connection and `--max-clients` clients, what they hold
/// uncounted is bounded too (400 KiB a client).
pub const UNCOUNTED_STREAM_BYTES: usize = 4096;

/// Bounds on what a peer may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest message (not counting a write's or read's raw bytes).
    pub max_message_bytes: usize,
    /// Most tensors in one graph.
    pub max_graph_tensors: usize,
    /// Most elements of one tensor, a zero dimension counted as one
    /// ([`gantry_engine::Limits::check_shape`]).
    pub max_tensor_elements: u64,
    /// Most buffers one client may hold on a server.
    pub max_buffers: usize,
    /// Bytes moved per step of a write or read (what a transfer holds in
    /// memory at once, besides the buffer itself).
    pub chunk_bytes: usize,
    /// Graphs a server keeps per client for computing again by digest.
    pub kept_graphs: usize,
    /// Most bytes of buffers every client of a server holds together; the
    /// server lowers it to what its devices have (so `u64::MAX`, the
    /// default, means "the devices' memory"). Each client is also held to
    /// its device's memory on its own.
    pub max_memory: u64,
    /// How long a server lets one graph run before it aborts the compute
    /// through the backend's abort callback (polled between nodes and
    /// between the parts of a long node's kernel) and answers with an error.
    pub compute_timeout: Duration,
    /// Most bytes the streams of every client of a server hold together
    /// while requests and write chunks arrive (each stream's first
    /// [`UNCOUNTED_STREAM_BYTES`] excepted, so that small requests such as
    /// freeing a buffer always get through): many clients each sending
    /// many large requests slowly cannot make the server hold more.
    pub max_stream_memory: usize,
    /// How long one step of a stream may take on a server: the whole
    /// request message arriving, or one chunk of a write's bytes arriving
    /// or of a read's bytes being taken by the peer. A peer that stalls
    /// longer is cut off and what the stream held is freed.
    pub stream_timeout: Duration,
    /// How long a TLS handshake may take on a server before it is dropped
    /// (a client is only counted against `--max-clients` once it is done).
    pub handshake_timeout: Duration,
    /// Most TLS handshakes a server runs at once; a peer starting one more
    /// is refused until some finish or time out.
    pub max_handshakes: usize,
    /// How long a server keeps a connection that holds nothing: no buffer
    /// bytes (buffers of 0 bytes do not count), no stream under way (before its hello, or after it freed everything).
    /// Such a connection still takes one of `--max-clients` slots, so
    /// authenticated peers that connect and only keep the connection alive
    /// would otherwise lock real clients out; one holding buffers keeps its
    /// slot while connected (bounded by `max_memory` and `max_buffers`).
    pub unused_timeout: Duration,
}

impl Limits {
    /// The shape bounds shared with the engine's other readers of untrusted
    /// input (a graph's tensors are its tensors).
    pub fn shapes(&self) -> gantry_engine::Limits {
        gantry_engine::Limits {
            max_tensor_elements: self.max_tensor_elements,
            max_tensors: self.max_graph_tensors,
            ..gantry_engine::Limits::DEFAULT
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_bytes: 16 << 20,
            max_graph_tensors: 1 << 16,
            max_tensor_elements: gantry_engine::Limits::DEFAULT.max_tensor_elements,
            max_buffers: 1 << 16,
            chunk_bytes: 1 << 20,
            kept_graphs: 8,
            max_memory: u64::MAX,
            compute_timeout: Duration::from_secs(60),
            max_stream_memory: 256 << 20,
            stream_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            max_handshakes: 64,
            unused_timeout: Duration::from_secs(60),
        }
    }
}
