//! CPU events. CPU compute is synchronous, so an event is complete as soon
//! as it is recorded; the table still tracks which events exist and whether
//! they were recorded, so a stale or freed id is an error, as on a GPU.

use std::sync::Mutex;

use gantry_arenas::slotmap::SlotMap;
use gantry_engine::{Error, EventId, Result};

/// The state of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventState {
    /// Created, never recorded: waiting on it returns at once (as CUDA does).
    Created,
    /// Recorded on a stream; on the CPU that means the work before it is done.
    Complete,
}

/// The events of one CPU device.
#[derive(Debug, Default)]
pub struct EventTable {
    events: Mutex<SlotMap<EventId, EventState>>,
}

impl EventTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, SlotMap<EventId, EventState>> {
        // A panic while holding this lock cannot leave the map half-updated.
        self.events.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn stale(event: EventId) -> Error {
        Error::StaleHandle { kind: "event", handle: format!("{event:?} (CPU)") }
    }

    /// A new event.
    pub fn create(&self) -> EventId {
        self.lock().insert(EventState::Created)
    }

    /// Frees `event`; its id becomes stale.
    pub fn free(&self, event: EventId) -> Result<()> {
        self.lock().remove(event).map(drop).ok_or_else(|| Self::stale(event))
    }

    /// Marks `event` complete.
    pub fn record(&self, event: EventId) -> Result<()> {
        let mut events = self.lock();
        let state = events.get_mut(event).ok_or_else(|| Self::stale(event))?;
        *state = EventState::Complete;
        Ok(())
    }

    /// The state of `event`.
    pub fn state(&self, event: EventId) -> Result<EventState> {
        self.lock().get(event).copied().ok_or_else(|| Self::stale(event))
    }

    /// Waits for `event`: nothing to wait for on the CPU, but the id must be live.
    pub fn wait(&self, event: EventId) -> Result<()> {
        self.state(event).map(drop)
    }
}

#[cfg(test)]
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
}
