//! A device's events as a table a backend can share between the host and its
//! stream. An event is recorded on a stream: it completes once the stream has
//! done everything submitted before the record. A synchronous stream (the CPU)
//! has done it already, so [`EventTable::record`] completes the event at once;
//! a stream that runs behind the host records with
//! [`EventTable::record_pending`] and calls [`EventTable::complete`] with the
//! returned ticket when it gets there. [`EventTable::wait`] blocks the caller
//! until the record that was the latest when it was called has completed
//! (as `cudaEventSynchronize` does); a stream told to wait takes that ticket
//! when the wait is submitted ([`EventTable::latest`]) and waits for it
//! ([`EventTable::wait_for`]), as `cudaStreamWaitEvent` does.
//!
//! A freed or unknown id is an error, as on a GPU. The table is built from
//! [`crate::sync`], so the loom tests check it in every interleaving.

use slotmap::SlotMap;

use crate::sync::{Condvar, Mutex, MutexGuard, lock, wait};
use crate::{Error, EventId, Result};

/// The state of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventState {
    /// Created, never recorded: waiting on it returns at once (as CUDA does).
    Created,
    /// Recorded; the stream has not yet reached the (latest) record.
    Pending,
    /// Recorded, and the stream has done the work before the latest record.
    Complete,
}

/// Records of one event: tickets handed out and the highest one completed.
/// Streams run in order, so completing ticket `n` completes every earlier one.
#[derive(Debug, Clone, Copy, Default)]
struct Records {
    recorded: u64,
    completed: u64,
}

impl Records {
    fn state(self) -> EventState {
        match (self.recorded, self.completed) {
            (0, _) => EventState::Created,
            (r, c) if c < r => EventState::Pending,
            _ => EventState::Complete,
        }
    }
}

/// The events of one device.
#[derive(Default)]
pub struct EventTable {
    events: Mutex<SlotMap<EventId, Records>>,
    /// Notified whenever an event completes or is freed.
    changed: Condvar,
}

impl std::fmt::Debug for EventTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventTable").field("events", &self.lock().len()).finish()
    }
}

impl EventTable {
    fn lock(&self) -> MutexGuard<'_, SlotMap<EventId, Records>> {
        lock(&self.events)
    }

    fn stale(event: EventId) -> Error {
        Error::StaleHandle { kind: "event", handle: format!("{event:?}") }
    }

    /// A new event.
    pub fn create(&self) -> EventId {
        self.lock().insert(Records::default())
    }

    /// Frees `event`; its id becomes stale (a thread waiting on it gets an error).
    pub fn free(&self, event: EventId) -> Result<()> {
        let removed = self.lock().remove(event).map(drop).ok_or_else(|| Self::stale(event));
        self.changed.notify_all();
        removed
    }

    /// Records `event` on a stream that has already done all its work: the
    /// event is complete at once.
    pub fn record(&self, event: EventId) -> Result<()> {
        let ticket = self.record_pending(event)?;
        self.complete(event, ticket)
    }

    /// Records `event` on a stream that runs behind the host: the event is
    /// pending until [`EventTable::complete`] is called with the returned
    /// ticket (or a later one).
    pub fn record_pending(&self, event: EventId) -> Result<u64> {
        let mut events = self.lock();
        let records = events.get_mut(event).ok_or_else(|| Self::stale(event))?;
        records.recorded += 1;
        Ok(records.recorded)
    }

    /// The stream has done the work before record `ticket` of `event`.
    pub fn complete(&self, event: EventId, ticket: u64) -> Result<()> {
        {
            let mut events = self.lock();
            let records = events.get_mut(event).ok_or_else(|| Self::stale(event))?;
            records.completed = records.completed.max(ticket);
        }
        self.changed.notify_all();
        Ok(())
    }

    /// The state of `event`.
    pub fn state(&self, event: EventId) -> Result<EventState> {
        self.lock().get(event).map(|r| r.state()).ok_or_else(|| Self::stale(event))
    }

    /// The ticket of the latest record of `event` (0 when never recorded):
    /// what a stream told now to wait for `event` must wait for, however
    /// often the event is recorded again before the stream gets there.
    pub fn latest(&self, event: EventId) -> Result<u64> {
        self.lock().get(event).map(|r| r.recorded).ok_or_else(|| Self::stale(event))
    }

    /// Blocks until the record of `event` that was the latest when this was
    /// called has completed (at once for an event never recorded, or
    /// recorded by a synchronous stream). Records made while waiting do not
    /// extend the wait.
    pub fn wait(&self, event: EventId) -> Result<()> {
        let ticket = self.latest(event)?;
        self.wait_for(event, ticket)
    }

    /// Blocks until record `ticket` of `event` (see [`EventTable::latest`]) has completed.
    pub fn wait_for(&self, event: EventId, ticket: u64) -> Result<()> {
        let mut events = self.lock();
        loop {
            match events.get(event) {
                None => return Err(Self::stale(event)),
                Some(r) if r.completed < ticket => events = wait(&self.changed, events),
                Some(_) => return Ok(()),
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_and_stale_ids() {
        let table = EventTable::default();
        let e = table.create();
        assert_eq!(table.state(e).unwrap(), EventState::Created);
        table.wait(e).unwrap();
        table.record(e).unwrap();
        assert_eq!(table.state(e).unwrap(), EventState::Complete);
        table.free(e).unwrap();
        for err in [table.record(e).unwrap_err(), table.wait(e).unwrap_err(), table.free(e).unwrap_err()] {
            assert!(matches!(err, Error::StaleHandle { kind: "event", .. }), "{err}");
        }
        let e2 = table.create();
        assert_ne!(e, e2, "a reused slot gets a new version");
    }

    #[test]
    fn pending_until_the_latest_record_completes() {
        let table = EventTable::default();
        let e = table.create();
        let first = table.record_pending(e).unwrap();
        let second = table.record_pending(e).unwrap();
        assert_eq!(table.state(e).unwrap(), EventState::Pending);
        table.complete(e, first).unwrap();
        assert_eq!(table.state(e).unwrap(), EventState::Pending, "an earlier record does not complete a later one");
        table.complete(e, second).unwrap();
        assert_eq!(table.state(e).unwrap(), EventState::Complete);
        table.wait(e).unwrap();
        // A wait taken before a new record is not extended by it.
        let before = table.latest(e).unwrap();
        table.record_pending(e).unwrap();
        table.wait_for(e, before).unwrap();
        assert_eq!(table.state(e).unwrap(), EventState::Pending);
    }

    #[test]
    fn wait_blocks_until_another_thread_completes() {
        let table = std::sync::Arc::new(EventTable::default());
        let e = table.create();
        let ticket = table.record_pending(e).unwrap();
        let stream = {
            let table = table.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                table.complete(e, ticket).unwrap();
            })
        };
        table.wait(e).unwrap();
        assert_eq!(table.state(e).unwrap(), EventState::Complete);
        stream.join().unwrap();
    }
}
