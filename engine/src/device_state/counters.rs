//! Counters a device shares between threads: ids handed out once, and the
//! bytes allocated.

use crate::sync::atomic::{AtomicU64, Ordering};

/// Hands out ids, each once: a number an object is known by in caches after
/// it is gone (ids are never reused, so a stale cache entry matches nothing
/// new).
#[derive(Debug)]
pub struct IdCounter(AtomicU64);

impl IdCounter {
    /// A counter whose first id is `first`.
    pub fn new(first: u64) -> Self {
        Self(AtomicU64::new(first))
    }

    /// A new id. One read-modify-write, so two threads never get the same
    /// id; `Relaxed`, as the id orders nothing else. 2^64 ids do not run out.
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// Bytes allocated, raised and lowered from any thread.
#[derive(Debug, Default)]
pub struct ByteCounter(AtomicU64);

impl ByteCounter {
    /// Counts `bytes` more.
    pub fn add(&self, bytes: u64) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts `bytes` fewer (bytes counted before by [`ByteCounter::add`]).
    pub fn sub(&self, bytes: u64) {
        self.0.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The bytes counted now (a figure for reports: `Relaxed`, it orders
    /// nothing).
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
