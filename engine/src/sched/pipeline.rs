//! The pipeline protocol of [`super::compute`]: with `n_copies > 1`, run `k`
//! copies its split inputs into copy slot `k % n_copies` of each backend, so
//! the host can fill one slot while a backend still computes from another.
//! One event per (backend, copy) guards a slot: whoever overwrites it first
//! waits for the event, and the backend records it after computing from it.
//!
//! The steps live here, generic over [`PipelineStream`], so the loom tests
//! (`tests/loom_pipeline.rs`) drive this same code against a model stream
//! running on its own thread.

use gantry_arenas::EventId;

use super::BackendIndex;
use crate::{Backend, Result};

/// What the protocol asks of a stream. Every [`Backend`] is one.
pub trait PipelineStream {
    /// Work submitted to the stream after this waits for `event` (on the device).
    fn stream_wait(&self, event: EventId) -> Result<()>;
    /// Records `event` after the work submitted so far.
    fn stream_record(&self, event: EventId) -> Result<()>;
    /// Blocks the host until `event` has completed.
    fn host_wait(&self, event: EventId) -> Result<()>;
    /// Blocks the host until the stream has done all submitted work.
    fn host_synchronize(&self) -> Result<()>;
}

impl PipelineStream for dyn Backend {
    fn stream_wait(&self, event: EventId) -> Result<()> {
        self.event_wait(event)
    }
    fn stream_record(&self, event: EventId) -> Result<()> {
        self.event_record(event)
    }
    fn host_wait(&self, event: EventId) -> Result<()> {
        self.device().event_synchronize(event)
    }
    fn host_synchronize(&self) -> Result<()> {
        self.synchronize()
    }
}

/// The pipeline copy after `copy` (the ring wraps at `n_copies`).
pub fn next_copy(copy: usize, n_copies: usize) -> usize {
    (copy + 1) % n_copies.max(1)
}

/// Where the event of (`backend`, `copy`) is in the scheduler's event list.
pub fn event_index(backend: BackendIndex, copy: usize, n_copies: usize) -> usize {
    backend.get() * n_copies + copy
}

/// One split's pass through the protocol: its stream and the event of the
/// copy slot it uses in this run (`None`: no pipelining, or a device without
/// events; then it falls back to synchronizing the whole stream).
pub struct SlotGuard<'a, S: PipelineStream + ?Sized> {
    /// The split's stream.
    pub stream: &'a S,
    /// The event guarding this run's copy slot on that stream.
    pub event: Option<EventId>,
}

impl<S: PipelineStream + ?Sized> SlotGuard<'_, S> {
    /// The host waits until the stream is done computing from this slot.
    pub fn host_wait(&self) -> Result<()> {
        match self.event {
            Some(ev) => self.stream.host_wait(ev),
            None => self.stream.host_synchronize(),
        }
    }

    /// Copies one input into the slot. A user input is copied by the host at
    /// once (`host_copy`), after [`SlotGuard::host_wait`]: the user may
    /// overwrite it as soon as compute returns. Any other input is copied
    /// by `copy_async` (the scheduler's: [`crate::tensor_copy_async_with`])
    /// once the stream waits for the slot's event; it is handed the slot
    /// wait, for a copy that falls back to the host.
    pub fn copy_input(
        &self,
        user_input: bool,
        host_copy: impl FnOnce() -> Result<()>,
        copy_async: impl FnOnce(&dyn Fn() -> Result<()>) -> Result<()>,
    ) -> Result<()> {
        if user_input {
            self.host_wait()?;
            return host_copy();
        }
        match self.event {
            Some(ev) => self.stream.stream_wait(ev)?,
            None => self.stream.host_synchronize()?,
        }
        copy_async(&|| self.host_wait())
    }

    /// After the split's compute is submitted: the slot is free again once
    /// the stream gets here. Splits without inputs use no slot.
    pub fn computed(&self, had_inputs: bool) -> Result<()> {
        match self.event {
            Some(ev) if had_inputs => self.stream.stream_record(ev),
            _ => Ok(()),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn ring_and_event_layout() {
        assert_eq!(
            (0..5).scan(0, |c, _| Some(std::mem::replace(c, next_copy(*c, 3)))).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1]
        );
        assert_eq!(next_copy(0, 1), 0);
        assert_eq!(event_index(BackendIndex::new(2), 1, 4), 9);
    }
}
