//! Opaque handles: what C holds is a number, never a pointer.
//!
//! Each kind of object lives in a [`Table`] (a slotmap behind a lock); a
//! handle is its key as a `u64` (the slot and its generation), so a freed or
//! made-up handle is found stale and answered with
//! `GANTRY_ERROR_INVALID_HANDLE`, never followed. Handle 0 is the null
//! handle: no key is 0 (an occupied slot's generation is odd).
//!
//! Every table's first key is the same (slot 0, generation 1), so each
//! kind marks its handles with a tag of its own in the generation's top 16
//! bits: a handle given where another kind is expected (a scheduler's to
//! `gantry_context_free`) decodes to a generation no live slot has and is
//! refused, rather than naming that table's object of the same number. (A
//! slot would have to be reused 2^15 times before its generation reached
//! the tagged bits.)

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use slotmap::{DefaultKey, Key, KeyData, SlotMap};

use crate::entry::Failure;
use crate::status::GantryStatus;

/// One kind of object, keyed by handle. Objects are shared (`Arc`) so a
/// call keeps its object alive even when another thread frees the handle
/// meanwhile, and locked (`Mutex`) so calls on one object run one at a time.
pub(crate) struct Table<T> {
    kind: &'static str,
    /// The kind's tag, in bits 48..64 of its handles.
    tag: u64,
    slots: Mutex<SlotMap<DefaultKey, Arc<Mutex<T>>>>,
}

impl<T> Table<T> {
    /// An empty table of objects called `kind` in messages, their handles
    /// marked with `tag` (one of its own per kind).
    pub(crate) fn new(kind: &'static str, tag: u16) -> Self {
        Self { kind, tag: u64::from(tag) << 48, slots: Mutex::new(SlotMap::new()) }
    }

    fn slots(&self) -> MutexGuard<'_, SlotMap<DefaultKey, Arc<Mutex<T>>>> {
        // The table's own lock guards plain slotmap calls, which leave it
        // consistent even if a panic unwound through a holder.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `value`; returns its handle.
    pub(crate) fn insert(&self, value: T) -> u64 {
        self.slots().insert(Arc::new(Mutex::new(value))).data().as_ffi() ^ self.tag
    }

    fn key(&self, handle: u64) -> Result<DefaultKey, Failure> {
        if handle == 0 {
            return Err(Failure::new(GantryStatus::GantryErrorInvalidHandle, format!("null {} handle", self.kind)));
        }
        Ok(DefaultKey::from(KeyData::from_ffi(handle ^ self.tag)))
    }

    fn stale(&self, handle: u64) -> Failure {
        Failure::new(
            GantryStatus::GantryErrorInvalidHandle,
            format!("{} handle {handle:#x} is not live (freed, or never made)", self.kind),
        )
    }

    /// The object behind `handle`.
    pub(crate) fn get(&self, handle: u64) -> Result<Arc<Mutex<T>>, Failure> {
        let key = self.key(handle)?;
        self.slots().get(key).cloned().ok_or_else(|| self.stale(handle))
    }

    /// Removes `handle`'s object and returns it (it is dropped when the
    /// last call still using it returns).
    pub(crate) fn remove(&self, handle: u64) -> Result<Arc<Mutex<T>>, Failure> {
        let key = self.key(handle)?;
        self.slots().remove(key).ok_or_else(|| self.stale(handle))
    }
}

/// Locks one object for a call. A lock poisoned by a panic inside an
/// earlier call means the object may be half-changed: the call fails.
pub(crate) fn lock<'a, T>(object: &'a Mutex<T>, kind: &str) -> Result<MutexGuard<'a, T>, Failure> {
    object.lock().map_err(|_| {
        Failure::new(
            GantryStatus::GantryErrorPanic,
            format!("this {kind} is unusable: an earlier call on it panicked inside Gantry"),
        )
    })
}
