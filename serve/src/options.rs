//! The server's settings: how many sequences run together and the limits
//! that keep it up under any client.

use std::net::SocketAddr;
use std::time::Duration;

/// How the server runs and what it accepts.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Sequences decoding together (slots); each holds `n_ctx / parallel` tokens.
    pub parallel: usize,
    /// Most tokens of one step's batch: every decoding sequence's next token and
    /// chunks of waiting prompts up to this many (a long prompt runs over several
    /// steps, so it never stalls the others).
    pub batch_size: usize,
    /// Requests that may wait for a slot; more are answered 503 with `Retry-After`.
    pub queue: usize,
    /// Keep a finished sequence's cells and reuse its longest common prefix with
    /// the next request on that slot (a system prompt, an earlier turn).
    pub cache_reuse: bool,
    /// Largest request body in bytes.
    pub max_body: usize,
    /// `max_tokens` above this is refused; a request without one generates at
    /// most this many (and never past its sequence's context).
    pub max_tokens: usize,
    /// A request's whole life, queue included: past it, it is stopped (an
    /// error, or an error event when streaming) and its slot freed.
    pub request_timeout: Duration,
    /// A client must send its request's headers within this (a kept-alive
    /// connection, its next request's), and its body within this after them;
    /// else the connection is closed (408 for a late body).
    pub header_timeout: Duration,
    /// Open connections at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// On SIGINT/SIGTERM, how long running requests may take to finish before
    /// they are ended with an error.
    pub shutdown_grace: Duration,
    /// When set, every route except `/health` needs `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            parallel: 4,
            batch_size: 512,
            queue: 64,
            cache_reuse: true,
            max_body: 4 << 20,
            max_tokens: 4096,
            request_timeout: Duration::from_secs(600),
            header_timeout: Duration::from_secs(10),
            max_connections: 1024,
            shutdown_grace: Duration::from_secs(30),
            api_key: None,
        }
    }
}
