//! What the sessions of one running server share besides its
//! [`ServerState`]: the memory all of them hold, each device's turn to
//! compute, and the counts the listener keeps (clients, handshakes, bytes
//! held by streams), which [`ServerUsage`] reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::compute_gate::ComputeGate;
use super::memory_cap::MemoryCap;
use super::session::ServerState;

/// The shared part of a running server.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Buffers of every session, against `--max-memory`.
    pub(crate) memory: MemoryCap,
    /// One per served device, by index.
    pub(crate) gates: Vec<ComputeGate>,
    /// Clients connected (handshake done).
    pub(crate) clients: AtomicUsize,
    /// TLS handshakes under way.
    pub(crate) handshakes: AtomicUsize,
    /// Bytes streams hold while a request's message or a write's chunk arrives.
    pub(crate) stream_bytes: AtomicUsize,
    /// The part of `stream_bytes` past each stream's first
    /// [`UNCOUNTED_STREAM_BYTES`](crate::wire::UNCOUNTED_STREAM_BYTES), against `--max-stream-memory`.
    pub(crate) stream_cap: MemoryCap,
}

/// What a running server holds now (for tests and monitoring).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerUsage {
    /// Clients connected (their TLS handshake done).
    pub clients: usize,
    /// TLS handshakes under way (not yet clients).
    pub handshakes: usize,
    /// Bytes of buffers every client holds together.
    pub buffer_bytes: u64,
    /// The cap on `buffer_bytes`.
    pub memory_cap: u64,
    /// Bytes held by streams for requests still arriving.
    pub stream_bytes: usize,
}

impl Shared {
    /// Nothing held yet; the memory cap is `state.limits.max_memory`, lowered
    /// to what the served devices have together.
    pub(crate) fn new(state: &ServerState) -> Self {
        let devices = state.devices.iter().map(|d| d.device.memory().total as u64).fold(0u64, u64::saturating_add);
        Self {
            memory: MemoryCap::new(state.limits.max_memory.min(devices)),
            gates: state.devices.iter().map(|_| ComputeGate::default()).collect(),
            clients: AtomicUsize::new(0),
            handshakes: AtomicUsize::new(0),
            stream_bytes: AtomicUsize::new(0),
            stream_cap: MemoryCap::for_streams(state.limits.max_stream_memory as u64),
        }
    }

    /// What is held now.
    pub(crate) fn usage(&self) -> ServerUsage {
        ServerUsage {
            clients: self.clients.load(Ordering::SeqCst),
            handshakes: self.handshakes.load(Ordering::SeqCst),
            buffer_bytes: self.memory.held(),
            memory_cap: self.memory.cap(),
            stream_bytes: self.stream_bytes.load(Ordering::SeqCst),
        }
    }
}

/// Which count of [`Shared`] a [`Counted`] is of.
pub(crate) type CountOf = fn(&Shared) -> &AtomicUsize;

/// One unit of a count of [`Shared`], given back when dropped (however the
/// task holding it ends).
pub(crate) struct Counted {
    shared: Arc<Shared>,
    which: CountOf,
}

impl Counted {
    /// Takes one unit of `which` count of `shared` if it is below `max`.
    pub(crate) fn take(shared: &Arc<Shared>, which: CountOf, max: usize) -> Option<Self> {
        which(shared)
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1))
            .ok()
            .map(|_| Self { shared: shared.clone(), which })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        (self.which)(&self.shared).fetch_sub(1, Ordering::SeqCst);
    }
}
