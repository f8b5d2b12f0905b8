//! Slotmap key types: the entities of Gantry.
//!
//! Every key is a generational index into one table. Removing an entry bumps
//! the slot's version, so an old key no longer resolves: lookups return `None`
//! and the owning crate turns that into a "stale handle" error.

use slotmap::{Key, new_key_type};

new_key_type! {
    /// A tensor: its description, placement and data live in tables keyed by this.
    pub struct TensorId;
    /// A buffer of device memory holding tensor data.
    pub struct BufferId;
    /// A device found by a platform: a CPU, a GPU, an accelerator.
    pub struct DeviceId;
    /// A synchronization event recorded on a backend's stream.
    pub struct EventId;
    /// A graph plan: the work for one graph on one backend, made once and
    /// computed many times (kept in the backend's plan table).
    pub struct PlanId;
}

/// The dense slot index of a key (its position in the table's slot array).
///
/// Slot indices are reused after removal, which is what makes them good
/// indices for bitsets and columns sized by the table's capacity.
///
/// ```
/// use gantry_arenas::{slotmap::SlotMap, TensorId, keys::slot_index};
/// let mut table: SlotMap<TensorId, u32> = SlotMap::with_key();
/// let a = table.insert(1);
/// let b = table.insert(2);
/// assert_ne!(slot_index(a), slot_index(b));
/// ```
#[inline]
pub fn slot_index<K: Key>(key: K) -> usize {
    // The low 32 bits of the FFI form are the slot index (slotmap's documented layout).
    (key.data().as_ffi() & 0xffff_ffff) as usize
}
