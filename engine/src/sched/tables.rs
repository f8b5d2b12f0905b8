//! The scheduler's per-run component tables, indexed by tensor slot:
//! [`Assignments`] (backend per tensor, and why), [`CopyTable`] (copies per
//! tensor, backend and pipeline copy) and [`Prealloc`] (the buffer a tensor
//! was placed in by someone other than the scheduler).
//!
//! The tables are stamped with a run generation: starting a new run bumps
//! the generation instead of clearing memory, so a reset costs nothing and
//! the tables only allocate when the tensor table outgrows them.

use gantry_arenas::keys::slot_index;
use gantry_arenas::{BufferId, TensorId};

use super::{BackendIndex, BackendSet, Cause};
use crate::{BufferUsage, Context, Error, Graph, Result};

/// The user's pins: the backend a tensor must run on (never overwritten).
pub type Pins = slotmap::SecondaryMap<TensorId, BackendIndex>;

#[derive(Debug, Clone, Copy, Default)]
struct Stamped {
    generation: u32,
    backend: BackendIndex,
    cause: Cause,
}

/// Backend per tensor for the current run, and why.
#[derive(Debug, Default)]
pub struct Assignments {
    generation: u32,
    slots: Vec<Stamped>,
}

impl Assignments {
    /// Starts a new run: every tensor unassigned. Grows to `capacity` slots.
    pub fn begin(&mut self, capacity: usize) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: old stamps could collide; clear once every 2^32 runs.
            self.slots.iter_mut().for_each(|s| s.generation = 0);
            self.generation = 1;
        }
        if self.slots.len() < capacity {
            self.slots.resize(capacity, Stamped::default());
        }
    }

    /// The backend of `t` in this run.
    #[inline]
    pub fn get(&self, t: TensorId) -> Option<BackendIndex> {
        match self.slots.get(slot_index(t)) {
            Some(s) if s.generation == self.generation => Some(s.backend),
            _ => None,
        }
    }

    /// Why `t` has its backend.
    pub fn cause(&self, t: TensorId) -> Cause {
        match self.slots.get(slot_index(t)) {
            Some(s) if s.generation == self.generation => s.cause,
            _ => Cause::None,
        }
    }

    /// Assigns `t` to `backend`.
    #[inline]
    pub fn set(&mut self, t: TensorId, backend: BackendIndex, cause: Cause) {
        let i = slot_index(t);
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Stamped::default());
        }
        self.slots[i] = Stamped { generation: self.generation, backend, cause };
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

/// For every tensor of the graph, the buffer it (or its view source) was
/// placed in by someone other than the scheduler, looked up once per run.
#[derive(Debug, Default)]
pub struct Prealloc {
    generation: u32,
    slots: Vec<(u32, u8)>,
    buffers: Vec<PreallocBuffer>,
}

const NOT_PREALLOCATED: u8 = u8::MAX;

impl Prealloc {
    /// Looks up every leaf and node of `graph`. `own` lists the scheduler's
    /// compute buffers, which it re-binds every run (not pre-allocated).
    pub fn fill(&mut self, ctx: &Context, graph: Graph<'_>, own: &[BufferId], set: &BackendSet) -> Result<()> {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.slots.iter_mut().for_each(|s| s.0 = 0);
            self.generation = 1;
        }
        let capacity = ctx.slot_capacity() + 1;
        if self.slots.len() < capacity {
            self.slots.resize(capacity, (0, NOT_PREALLOCATED));
        }
        self.buffers.clear();
        for &t in graph.leafs().iter().chain(graph.nodes()) {
            let mut index = NOT_PREALLOCATED;
            if let Some(p) = ctx.placement(t)
                && !own.contains(&p.buffer)
                && let Ok(entry) = ctx.buffer(p.buffer)
            {
                index = match self.buffers.iter().position(|b| b.buffer == p.buffer) {
                    Some(i) => i as u8,
                    None if self.buffers.len() < NOT_PREALLOCATED as usize => {
                        let readable = set
                            .indices()
                            .filter(|&b| set.supports_buft(b, entry.buffer_type.as_ref()))
                            .fold(0u16, |m, b| m | b.bit());
                        self.buffers.push(PreallocBuffer {
                            buffer: p.buffer,
                            usage: entry.usage,
                            readable,
                            is_host: entry.buffer_type.is_host(),
                        });
                        (self.buffers.len() - 1) as u8
                    }
                    None => {
                        return Err(Error::Scheduler(format!(
                            "a graph reading tensors from more than {} buffers",
                            NOT_PREALLOCATED
                        )));
                    }
                };
            }
            self.slots[slot_index(t)] = (self.generation, index);
        }
        Ok(())
    }

    /// The buffer `t` (or its view source) was pre-allocated in, if any.
    #[inline]
    pub fn get(&self, t: TensorId) -> Option<&PreallocBuffer> {
        match self.slots.get(slot_index(t)) {
            Some(&(g, i)) if g == self.generation && i != NOT_PREALLOCATED => self.buffers.get(i as usize),
            _ => None,
        }
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
        t.set(a, B1, Cause::Input);
        assert_eq!((t.get(a), t.get(b), t.cause(a)), (Some(B1), None, Cause::Input));
        t.begin(2);
        assert_eq!(t.get(a), None);
        let c = ids.insert(());
        t.set(c, B0, Cause::User);
        assert_eq!(t.get(c), Some(B0), "grows past the capacity given to begin");

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
