//! Bytes arriving on a server's stream, held in a buffer that grows with
//! the bytes that actually arrive (never sized from a length the peer
//! announced) and read under a deadline, so a peer that announces 16 MiB
//! and sends one byte holds one byte, and only until the deadline. What
//! every stream holds past its first few KiB counts against the server's
//! `--max-stream-memory`, so many slow large requests together are refused
//! before they exhaust the server.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use quinn::RecvStream;

use super::shared::Shared;
use crate::wire::UNCOUNTED_STREAM_BYTES;

/// A stream's received bytes, counted in the server's
/// [`ServerUsage::stream_bytes`](super::ServerUsage::stream_bytes) while held.
pub(crate) struct Inbox {
    bytes: Vec<u8>,
    shared: Arc<Shared>,
}

impl Inbox {
    /// An empty inbox (nothing allocated yet).
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { bytes: Vec::new(), shared }
    }

    /// The bytes held.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Forgets the bytes held, keeping the memory for the next ones.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
    }

    /// Makes room for `more` bytes, at most `want` in all: the capacity at
    /// most doubles per step, so it stays within twice what has arrived.
    fn grow(&mut self, more: usize, want: usize) -> Result<(), String> {
        let (len, cap) = (self.bytes.len(), self.bytes.capacity());
        let needed = len.saturating_add(more);
        if needed <= cap {
            return Ok(());
        }
        let target = needed.max(cap.saturating_mul(2)).min(want.max(needed));
        // Counted against the streams' cap before it is allocated.
        let more_counted = counted(target).saturating_sub(counted(cap));
        self.shared.stream_cap.take(more_counted as u64).map_err(|e| e.to_string())?;
        if let Err(e) = self.bytes.try_reserve_exact(target - len) {
            self.shared.stream_cap.give_back(more_counted as u64);
            return Err(format!("no memory for {target} bytes of a stream: {e}"));
        }
        // The allocator may give more than asked: that is counted too.
        let extra = counted(self.bytes.capacity()).saturating_sub(counted(target));
        self.shared.stream_cap.force(extra as u64);
        let grown = self.bytes.capacity() - cap;
        self.shared.stream_bytes.fetch_add(grown, Ordering::SeqCst);
        Ok(())
    }

    /// Reads until `want` bytes are held, as they arrive, giving up at
    /// `deadline`. The error says how far it got.
    pub(crate) async fn fill(&mut self, recv: &mut RecvStream, want: usize, deadline: Instant) -> Result<(), String> {
        let deadline = tokio::time::Instant::from_std(deadline);
        while self.bytes.len() < want {
            let left = want - self.bytes.len();
            match tokio::time::timeout_at(deadline, recv.read_chunk(left, true)).await {
                Ok(Ok(Some(chunk))) => {
                    // `read_chunk` gives at most `left` bytes; never hold more than asked for.
                    let piece = &chunk.bytes[..chunk.bytes.len().min(left)];
                    self.grow(piece.len(), want)?;
                    self.bytes.extend_from_slice(piece);
                }
                Ok(Ok(None)) => {
                    return Err(format!("the stream ended after {} of {want} bytes", self.bytes.len()));
                }
                Ok(Err(e)) => return Err(format!("{e} after {} of {want} bytes", self.bytes.len())),
                Err(_) => {
                    return Err(format!(
                        "the peer stalled: {} of {want} bytes arrived before the stream's deadline (--stream-timeout)",
                        self.bytes.len()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The bytes of a stream's buffer of `capacity` that count against the cap.
fn counted(capacity: usize) -> usize {
    capacity.saturating_sub(UNCOUNTED_STREAM_BYTES)
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.shared.stream_cap.give_back(counted(self.bytes.capacity()) as u64);
        self.shared.stream_bytes.fetch_sub(self.bytes.capacity(), Ordering::SeqCst);
    }
}
