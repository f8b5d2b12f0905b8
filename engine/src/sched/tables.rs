//! The scheduler's per-run component tables: [`Assignments`] (backend per
//! tensor, and why) and [`CopyTable`] (copies per tensor, backend and
//! pipeline copy), indexed by tensor slot; [`Prealloc`] (the buffer a
//! tensor was placed in by someone other than the scheduler) and
//! [`Support`] (which backends run each op), over the gathered graph's
//! dense entries (the allocator's `TensorTable`).
//!
//! The tables are stamped with a run generation: starting a new run bumps
//! the generation instead of clearing memory, so a reset costs nothing and
//! the tables only allocate when the tensor table outgrows them.

use std::cell::Cell;

use gantry_arenas::keys::slot_index;
use gantry_arenas::{BufferId, TensorId};

use super::{BackendIndex, BackendSet, Cause};
use crate::alloc::tensor_table::{NOT_EXTERNAL, TensorTable, kind};
use crate::{BufferUsage, Context, Result};

/// The user's pins: the backend a tensor must run on (never overwritten).
pub type Pins = slotmap::SecondaryMap<TensorId, BackendIndex>;

/// Backend per entry of the gathered graph for the current run, and why
/// (indexed like the allocator's `TensorTable`; a new run starts with every
/// entry unassigned).
///
/// Two columns: the spreading steps read the backend of every node several
/// times and the cause only of a few, so the backend is one byte per entry.
#[derive(Debug, Default)]
pub struct Assignments {
    /// Each entry's backend, or [`UNASSIGNED`].
    backends: Vec<u8>,
    /// Why each entry has its backend ([`Cause::None`] when unassigned).
    causes: Vec<Cause>,
}

/// An entry without a backend in [`Assignments`] (no backend index reaches it).
pub(crate) const UNASSIGNED: u8 = u8::MAX;

impl Assignments {
    /// Starts a new run over `n` entries, all unassigned.
    pub fn begin(&mut self, n: usize) {
        self.backends.clear();
        self.backends.resize(n, UNASSIGNED);
        self.causes.clear();
        self.causes.resize(n, Cause::None);
    }

    /// The backend of entry `d` in this run.
    #[inline]
    pub fn get(&self, d: usize) -> Option<BackendIndex> {
        match self.backends.get(d) {
            Some(&b) if b != UNASSIGNED => Some(BackendIndex::from_u8(b)),
            _ => None,
        }
    }

    /// Each entry's backend index as a byte, [`UNASSIGNED`] where none
    /// (for systems that map every entry at once).
    #[inline]
    pub(crate) fn backend_bytes(&self) -> &[u8] {
        &self.backends
    }

    /// Why entry `d` has its backend.
    #[inline]
    pub fn cause(&self, d: usize) -> Cause {
        self.causes.get(d).copied().unwrap_or(Cause::None)
    }

    /// Assigns entry `d` to `backend` (`cause` is never [`Cause::None`]).
    #[inline]
    pub fn set(&mut self, d: usize, backend: BackendIndex, cause: Cause) {
        if d >= self.backends.len() || d >= self.causes.len() {
            self.grow(d + 1);
        }
        self.backends[d] = backend.get() as u8;
        self.causes[d] = cause;
    }

    /// Makes room for `n` entries (an entry added after the run began).
    #[cold]
    fn grow(&mut self, n: usize) {
        self.backends.resize(n, UNASSIGNED);
        self.causes.resize(n, Cause::None);
    }

    /// The backend of tensor `t` (looked up in `table`) in this run.
    #[inline]
    pub fn of(&self, table: &TensorTable, t: TensorId) -> Option<BackendIndex> {
        self.get(table.lookup(t)? as usize)
    }

    /// Why tensor `t` has its backend.
    pub fn cause_of(&self, table: &TensorTable, t: TensorId) -> Cause {
        table.lookup(t).map_or(Cause::None, |d| self.cause(d as usize))
    }
}

/// Copies of tensors per (tensor, destination backend, pipeline copy).
///
/// A copy is only good until its tensor's memory is written again: a node
/// computed in place, or a CPY / SET_ROWS into a cache, writes into its view
/// source's memory after copies of that memory (or of views of it) may have
/// been made. Each copy is stamped with its view source's count of such
/// writes when it was made, and [`CopyTable::get_current`] only returns
/// copies made since the last one.
#[derive(Debug, Default)]
pub struct CopyTable {
    generation: u32,
    n_backends: usize,
    n_copies: usize,
    entries: Vec<(u32, u32, Option<TensorId>)>,
    /// Per view source (memory owner): writes in place so far this run.
    writes: Vec<(u32, u32)>,
}

impl CopyTable {
    /// Starts a new run with no copies.
    pub fn begin(&mut self, capacity: usize, n_backends: usize, n_copies: usize) {
        if (n_backends, n_copies) != (self.n_backends, self.n_copies) {
            self.entries.clear();
            self.n_backends = n_backends;
            self.n_copies = n_copies;
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.entries.iter_mut().for_each(|e| e.0 = 0);
            self.writes.iter_mut().for_each(|w| w.0 = 0);
            self.generation = 1;
        }
        let want = capacity * n_backends * n_copies;
        if self.entries.len() < want {
            self.entries.resize(want, (0, 0, None));
        }
        if self.writes.len() < capacity {
            self.writes.resize(capacity, (0, 0));
        }
    }

    fn index(&self, t: TensorId, backend: BackendIndex, copy: usize) -> usize {
        (slot_index(t) * self.n_backends + backend.get()) * self.n_copies + copy
    }

    /// Writes into `root`'s memory so far this run.
    #[inline]
    fn writes_to(&self, root: TensorId) -> u32 {
        match self.writes.get(slot_index(root)) {
            Some(&(g, n)) if g == self.generation => n,
            _ => 0,
        }
    }

    /// Records a write into `root`'s memory: copies made before are stale.
    pub fn record_write(&mut self, root: TensorId) {
        let n = self.writes_to(root) + 1;
        let i = slot_index(root);
        if i >= self.writes.len() {
            self.writes.resize(i + 1, (0, 0));
        }
        self.writes[i] = (self.generation, n);
    }

    /// The copy of `t` on `backend` for pipeline copy `copy`, if made this
    /// run (current or not: for graph inputs, whose copy 0 is the input).
    #[inline]
    pub fn get(&self, t: TensorId, backend: BackendIndex, copy: usize) -> Option<TensorId> {
        match self.entries.get(self.index(t, backend, copy)) {
            Some(&(g, _, c)) if g == self.generation => c,
            _ => None,
        }
    }

    /// The copy of `t` (whose memory is `root`'s) on `backend`, if made
    /// since the last write into `root`'s memory.
    #[inline]
    pub fn get_current(&self, t: TensorId, root: TensorId, backend: BackendIndex, copy: usize) -> Option<TensorId> {
        match self.entries.get(self.index(t, backend, copy)) {
            Some(&(g, w, c)) if g == self.generation && w == self.writes_to(root) => c,
            _ => None,
        }
    }

    /// Records a copy of `t`, whose memory is `root`'s.
    pub fn set(&mut self, t: TensorId, root: TensorId, backend: BackendIndex, copy: usize, copy_tensor: TensorId) {
        let i = self.index(t, backend, copy);
        if i >= self.entries.len() {
            self.entries.resize(i + 1, (0, 0, None));
        }
        self.entries[i] = (self.generation, self.writes_to(root), Some(copy_tensor));
    }
}

/// A buffer holding pre-allocated tensors (weights, caches, user memory),
/// with what the scheduler asks of it.
#[derive(Debug, Clone, Copy)]
pub struct PreallocBuffer {
    /// The buffer.
    pub buffer: BufferId,
    /// What it holds.
    pub usage: BufferUsage,
    /// Bit `b` set when backend `b` can use its buffer type.
    pub readable: u16,
    /// Whether it is host memory.
    pub is_host: bool,
}

impl PreallocBuffer {
    /// Whether backend `b` can use this buffer.
    #[inline]
    pub fn readable_by(&self, b: BackendIndex) -> bool {
        self.readable & b.bit() != 0
    }
}

/// The pre-allocated buffers a gathered graph reads (weights, caches, user
/// buffers: placed by someone other than the scheduler), looked up once per
/// run, and which of them holds each tensor's memory.
#[derive(Debug, Default)]
pub struct Prealloc {
    buffers: Vec<PreallocBuffer>,
}

impl Prealloc {
    /// Describes the buffers `table` found.
    pub(crate) fn fill(&mut self, ctx: &Context, table: &TensorTable, set: &BackendSet) -> Result<()> {
        self.buffers.clear();
        for &buffer in &table.externals {
            let entry = ctx.buffer(buffer)?;
            let readable = set
                .indices()
                .filter(|&b| set.supports_buft(b, entry.buffer_type.as_ref()))
                .fold(0u16, |m, b| m | b.bit());
            self.buffers.push(PreallocBuffer {
                buffer,
                usage: entry.usage,
                readable,
                is_host: entry.buffer_type.is_host(),
            });
        }
        Ok(())
    }

    /// The buffer listed at `external` (a [`TensorTable::external`] index),
    /// if any.
    #[inline]
    pub(crate) fn buffer(&self, external: u8) -> Option<&PreallocBuffer> {
        match external {
            NOT_EXTERNAL => None,
            i => self.buffers.get(i as usize),
        }
    }

    /// The buffer entry `d`'s memory (its root's, for a view) was
    /// pre-allocated in, if any.
    #[inline]
    pub(crate) fn get(&self, table: &TensorTable, d: usize) -> Option<&PreallocBuffer> {
        match table.external(d) {
            NOT_EXTERNAL => None,
            i => self.buffers.get(i as usize),
        }
    }
}

/// Which backends support each entry's op, asked at most once per
/// (entry, backend) and run: the spreading steps ask again and again, and a
/// backend's `supports_op` is a call through a trait object that looks at
/// the tensor and its sources. Tensors that compute nothing run anywhere.
#[derive(Debug, Default)]
pub struct Support {
    /// Per entry: bits `0..16` the backends asked, bits `16..32` those that said yes.
    masks: Vec<Cell<u32>>,
    /// What every backend says about an entry that computes nothing.
    everyone: u32,
}

impl Support {
    /// Starts a run over `table`: nothing asked yet, except that entries
    /// computing nothing are known to run anywhere.
    pub(crate) fn begin(&mut self, table: &TensorTable, set: &BackendSet) {
        let all = u32::from(set.indices().fold(0u16, |m, b| m | b.bit()));
        self.everyone = all | all << 16;
        self.masks.clear();
        self.masks.extend(
            (0..table.len()).map(|d| Cell::new(if table.kind(d) & kind::COMPUTES == 0 { self.everyone } else { 0 })),
        );
    }

    /// Whether backend `b` can compute entry `d` (asking it the first time).
    #[inline]
    pub(crate) fn supports(
        &self,
        ctx: &Context,
        table: &TensorTable,
        set: &BackendSet,
        b: BackendIndex,
        d: usize,
    ) -> bool {
        let Some(cell) = self.masks.get(d) else { return false };
        let mask = cell.get();
        let asked = u32::from(b.bit());
        if mask & asked != 0 {
            return mask & (asked << 16) != 0;
        }
        Self::ask(cell, ctx, table, set, b, d)
    }

    /// Asks backend `b` about entry `d` and remembers the answer (once per
    /// entry and backend: kept out of the callers' loops).
    #[inline(never)]
    fn ask(cell: &Cell<u32>, ctx: &Context, table: &TensorTable, set: &BackendSet, b: BackendIndex, d: usize) -> bool {
        let asked = u32::from(b.bit());
        let yes = set.backend(b).device().supports_op(ctx, table.tensor(d));
        cell.set(cell.get() | asked | if yes { asked << 16 } else { 0 });
        yes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slotmap::SlotMap;

    const B0: BackendIndex = BackendIndex::new(0);
    const B1: BackendIndex = BackendIndex::new(1);

    #[test]
    fn a_new_run_forgets_without_clearing() {
        let mut ids: SlotMap<TensorId, ()> = SlotMap::with_key();
        let (a, b) = (ids.insert(()), ids.insert(()));
        let mut t = Assignments::default();
        t.begin(2);
        t.set(0, B1, Cause::Input);
        assert_eq!((t.get(0), t.get(1), t.cause(0)), (Some(B1), None, Cause::Input));
        t.begin(2);
        assert_eq!(t.get(0), None);
        t.set(2, B0, Cause::User);
        assert_eq!(t.get(2), Some(B0), "grows past the size given to begin");
        assert_eq!(t.get(5), None);

        let mut copies = CopyTable::default();
        copies.begin(3, 2, 2);
        copies.set(b, b, B1, 1, a);
        assert_eq!((copies.get(b, B1, 1), copies.get(b, B1, 0), copies.get(b, B0, 1)), (Some(a), None, None));
        copies.begin(3, 2, 2);
        assert_eq!(copies.get(b, B1, 1), None);
    }

    #[test]
    fn a_write_in_place_makes_earlier_copies_stale() {
        let mut ids: SlotMap<TensorId, ()> = SlotMap::with_key();
        let (root, view, copy, other) = (ids.insert(()), ids.insert(()), ids.insert(()), ids.insert(()));
        let mut copies = CopyTable::default();
        copies.begin(4, 2, 1);
        copies.set(view, root, B0, 0, copy);
        copies.set(other, other, B0, 0, copy);
        assert_eq!(copies.get_current(view, root, B0, 0), Some(copy));
        copies.record_write(root);
        assert_eq!(copies.get_current(view, root, B0, 0), None, "made before the write");
        assert_eq!(copies.get(view, B0, 0), Some(copy), "still listed");
        assert_eq!(copies.get_current(other, other, B0, 0), Some(copy), "other memory is untouched");
        copies.set(view, root, B0, 0, other);
        assert_eq!(copies.get_current(view, root, B0, 0), Some(other));
        copies.begin(4, 2, 1);
        copies.set(view, root, B0, 0, copy);
        assert_eq!(copies.get_current(view, root, B0, 0), Some(copy), "writes are forgotten by a new run");
    }
}
