//! The server's memory caps across sessions: every buffer a client
//! allocates is counted before it is made, so that clients together never
//! hold more than `--max-memory` (and never more than the served devices
//! have), whatever each one is allowed on its own; and every byte their
//! streams hold while requests arrive, against `--max-stream-memory`.

use std::sync::atomic::{AtomicU64, Ordering};

use gantry_engine::{BackendErrorKind, Error, Result};

/// Bytes every session of a server holds (of buffers, or in streams),
/// against a cap.
#[derive(Debug)]
pub(crate) struct MemoryCap {
    cap: u64,
    held: AtomicU64,
    /// What is counted, for errors: "a buffer", "a stream".
    what: &'static str,
    /// The flag that sets the cap, for errors.
    flag: &'static str,
}

impl MemoryCap {
    /// A cap of `cap` bytes of buffers (`--max-memory`) with nothing held.
    pub(crate) fn new(cap: u64) -> Self {
        Self { cap, held: AtomicU64::new(0), what: "a buffer", flag: "--max-memory" }
    }

    /// A cap of `cap` bytes held by streams (`--max-stream-memory`) with nothing held.
    pub(crate) fn for_streams(cap: u64) -> Self {
        Self { cap, held: AtomicU64::new(0), what: "a stream", flag: "--max-stream-memory" }
    }

    /// The cap in bytes.
    pub(crate) fn cap(&self) -> u64 {
        self.cap
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }

    /// Counts `size` more bytes, or refuses them (counting nothing) when
    /// they would take the total past the cap. The error names the request
    /// and the cap, so the client knows it is the server's limit and not
    /// its device that said no.
    pub(crate) fn take(&self, size: u64) -> Result<()> {
        let cap = self.cap;
        self.held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                held.checked_add(size).filter(|&total| total <= cap)
            })
            .map(drop)
            .map_err(|held| {
                Error::backend(
                    "rpc-server",
                    BackendErrorKind::Unsupported,
                    format!(
                        "{} of {size} bytes would take this server's clients past its memory cap of {cap} \
                         bytes ({}), of which {held} are held",
                        self.what, self.flag
                    ),
                )
            })
    }

    /// Counts `size` more bytes already held, past the cap if need be (an
    /// allocator's rounding up of what [`MemoryCap::take`] allowed).
    pub(crate) fn force(&self, size: u64) {
        self.held.fetch_add(size, Ordering::SeqCst);
    }

    /// Returns `size` bytes counted by [`MemoryCap::take`].
    pub(crate) fn give_back(&self, size: u64) {
        // Never below zero, even if a caller gave back twice (a bug, not a reason to wrap).
        let _ = self.held.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| Some(held.saturating_sub(size)));
    }
}

#[cfg(test)]
mod tests {
    use super::MemoryCap;

    #[test]
    fn takes_up_to_the_cap_and_names_it_when_refusing() {
        let cap = MemoryCap::new(100);
        cap.take(60).unwrap();
        let err = cap.take(41).unwrap_err().to_string();
        assert!(err.contains("41 bytes") && err.contains("cap of 100") && err.contains("60 are held"), "{err}");
        assert_eq!(cap.held(), 60, "a refusal counts nothing");
        cap.take(40).unwrap();
        assert!(cap.take(u64::MAX).is_err(), "no overflow");
        let streams = MemoryCap::for_streams(10).take(11).unwrap_err().to_string();
        assert!(streams.contains("a stream of 11 bytes") && streams.contains("--max-stream-memory"), "{streams}");
        cap.give_back(60);
        assert_eq!(cap.held(), 40);
        cap.give_back(1000);
        assert_eq!(cap.held(), 0);
    }
}
