//! The server's memory cap across sessions: every buffer a client allocates
//! is counted here before it is made, so that clients together never hold
//! more than `--max-memory` (and never more than the served devices have),
//! whatever each one is allowed on its own.

use std::sync::atomic::{AtomicU64, Ordering};

use gantry_engine::{BackendErrorKind, Error, Result};

/// Bytes of buffers every session of a server holds, against a cap.
#[derive(Debug)]
pub(crate) struct MemoryCap {
    cap: u64,
    held: AtomicU64,
}

impl MemoryCap {
    /// A cap of `cap` bytes with nothing held.
    pub(crate) fn new(cap: u64) -> Self {
        Self { cap, held: AtomicU64::new(0) }
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
                        "a buffer of {size} bytes would take this server's clients past its memory cap of {cap} \
                         bytes (--max-memory), of which {held} are held"
                    ),
                )
            })
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
        cap.give_back(60);
        assert_eq!(cap.held(), 40);
        cap.give_back(1000);
        assert_eq!(cap.held(), 0);
    }
}
