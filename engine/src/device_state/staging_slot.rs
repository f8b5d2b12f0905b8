//! A staging buffer kept for reuse by one reader at a time.

use crate::sync::{Mutex, MutexGuard};

use super::Poisoned;

/// The one staging buffer (of type `T`) a device reads back through, kept
/// between reads and replaced when a read needs more than it holds. A
/// reader holds the slot's lock from choosing the buffer until it is done
/// with it ([`StagingSlot::lock`] to the end of the [`Staging`] guard), so
/// two readers never map or fill the same buffer at once.
#[derive(Debug)]
pub struct StagingSlot<T>(Mutex<Option<T>>);

impl<T> Default for StagingSlot<T> {
    fn default() -> Self {
        Self(Mutex::new(None))
    }
}

impl<T> StagingSlot<T> {
    /// Waits until no other reader holds the slot and holds it; a slot whose
    /// holder panicked is [`Poisoned`] (its buffer may be left mapped).
    pub fn lock(&self) -> Result<Staging<'_, T>, Poisoned> {
        self.0.lock().map(Staging).map_err(|_| Poisoned)
    }
}

/// The slot of a [`StagingSlot`], held: the buffer in it is this reader's
/// until the guard is dropped.
#[derive(Debug)]
pub struct Staging<'a, T>(MutexGuard<'a, Option<T>>);

impl<T> Staging<'_, T> {
    /// The kept buffer when `fits` says it does, else one from `make`,
    /// which replaces the kept one (dropped once the new one is made; when
    /// `make` fails the kept one stays).
    pub fn fitting<E>(&mut self, fits: impl Fn(&T) -> bool, make: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        let slot = &mut *self.0;
        let staging = match slot.take() {
            Some(kept) if fits(&kept) => kept,
            kept => match make() {
                Ok(made) => made,
                Err(e) => {
                    *slot = kept;
                    return Err(e);
                }
            },
        };
        Ok(slot.insert(staging))
    }
}
