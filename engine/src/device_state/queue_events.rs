//! The events of a device with one in-order queue: each event holds the
//! queue point it was last recorded at, and is complete once the queue has
//! passed that point.

use crate::sync::{Mutex, lock};
use gantry_arenas::EventId;
use gantry_arenas::slotmap::SlotMap;

/// Events over queue points of type `P` (the device's submission index).
/// Each call is one critical section, so an event freed by one thread is
/// stale to every call that starts after, and a record never brings a freed
/// event back (slot-map keys are versioned: a new event never reuses one).
#[derive(Debug)]
pub struct QueueEvents<P>(Mutex<SlotMap<EventId, Option<P>>>);

impl<P> Default for QueueEvents<P> {
    fn default() -> Self {
        Self(Mutex::new(SlotMap::with_key()))
    }
}

impl<P: Clone> QueueEvents<P> {
    /// A new event, never recorded (waiting on it returns at once).
    pub fn create(&self) -> EventId {
        lock(&self.0).insert(None)
    }

    /// Frees `event`; `false` when it is not live (freed, or another
    /// table's).
    #[must_use]
    pub fn free(&self, event: EventId) -> bool {
        lock(&self.0).remove(event).is_some()
    }

    /// Records `event` at `point` (the queue's end now); `false` when it is
    /// not live.
    #[must_use]
    pub fn record(&self, event: EventId, point: P) -> bool {
        match lock(&self.0).get_mut(event) {
            Some(slot) => {
                *slot = Some(point);
                true
            }
            None => false,
        }
    }

    /// The point `event` was last recorded at: `None` when it is not live,
    /// `Some(None)` when it was never recorded.
    pub fn point(&self, event: EventId) -> Option<Option<P>> {
        lock(&self.0).get(event).cloned()
    }

    /// Whether `event` is live.
    pub fn contains(&self, event: EventId) -> bool {
        lock(&self.0).contains_key(event)
    }
}
