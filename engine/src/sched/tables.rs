//! The scheduler's per-run component tables, indexed by tensor slot.
//!
//! Both tables are stamped with a run generation: starting a new run bumps
//! the generation instead of clearing memory, so a reset costs nothing and
//! the tables only allocate when the tensor table outgrows them.

use gantry_arenas::TensorId;
use gantry_arenas::keys::slot_index;

/// Why a tensor went to its backend (the pass that chose it), for
/// `GANTRY_SCHED_DEBUG=2` and the Graphviz output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Cause {
    /// Not assigned.
    #[default]
    None,
    /// Pinned by the user (`set_tensor_backend`).
    User,
    /// Pre-allocated: the highest-priority backend that can use its buffer.
    Buffer,
    /// A view of a pre-allocated tensor: its source's buffer decided.
    ViewBuffer,
    /// A graph input: the CPU.
    Input,
    /// Reads weights: the weights' backend.
    Weights,
    /// Reads host weights, but a higher-priority backend wanted the op.
    Offload,
    /// Spread from a GPU neighbour (pass 2, GPU assignments only).
    ExpandGpu,
    /// Spread from any neighbour (pass 2).
    Expand,
    /// Unassigned: the backend supporting the most of its sources (pass 3).
    MostSources,
    /// Moved to a higher-priority backend with the same buffer type (pass 3).
    Upgrade,
    /// A view: follows its view source (pass 4).
    ViewSource,
    /// A source: follows its consumer (pass 4).
    Consumer,
    /// Still unassigned: the first backend supporting it (pass 4).
    Fallback,
    /// Computed in place: moved to where its memory is, or its view
    /// source's memory moved to where it runs (pass 4b).
    InPlace,
}

impl Cause {
    /// A short label like ggml's `SET_CAUSE` strings.
    pub const fn label(self) -> &'static str {
        match self {
            Cause::None => "-",
            Cause::User => "usr",
            Cause::Buffer => "1.dst",
            Cause::ViewBuffer => "1.vsrc",
            Cause::Input => "1.inp",
            Cause::Weights => "1.wgt",
            Cause::Offload => "1.off",
            Cause::ExpandGpu => "2.gpu",
            Cause::Expand => "2.sup",
            Cause::MostSources => "3.best",
            Cause::Upgrade => "3.upg",
            Cause::ViewSource => "4.vsrc",
            Cause::Consumer => "4.cur",
            Cause::Fallback => "4.any",
            Cause::InPlace => "4.mem",
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Stamped {
    generation: u32,
    backend: u8,
    cause: Cause,
}

/// Backend index per tensor for the current run.
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
    pub fn get(&self, t: TensorId) -> Option<u8> {
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
    pub fn set(&mut self, t: TensorId, backend: u8, cause: Cause) {
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

    fn index(&self, t: TensorId, backend: u8, copy: usize) -> usize {
        (slot_index(t) * self.n_backends + backend as usize) * self.n_copies + copy
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
    pub fn get(&self, t: TensorId, backend: u8, copy: usize) -> Option<TensorId> {
        match self.entries.get(self.index(t, backend, copy)) {
            Some(&(g, _, c)) if g == self.generation => c,
            _ => None,
        }
    }

    /// The copy of `t` (whose memory is `root`'s) on `backend`, if made
    /// since the last write into `root`'s memory.
    #[inline]
    pub fn get_current(&self, t: TensorId, root: TensorId, backend: u8, copy: usize) -> Option<TensorId> {
        match self.entries.get(self.index(t, backend, copy)) {
            Some(&(g, w, c)) if g == self.generation && w == self.writes_to(root) => c,
            _ => None,
        }
    }

    /// Records a copy of `t`, whose memory is `root`'s.
    pub fn set(&mut self, t: TensorId, root: TensorId, backend: u8, copy: usize, copy_tensor: TensorId) {
        let i = self.index(t, backend, copy);
        if i >= self.entries.len() {
            self.entries.resize(i + 1, (0, 0, None));
        }
        self.entries[i] = (self.generation, self.writes_to(root), Some(copy_tensor));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slotmap::SlotMap;

    #[test]
    fn a_new_run_forgets_without_clearing() {
        let mut ids: SlotMap<TensorId, ()> = SlotMap::with_key();
        let (a, b) = (ids.insert(()), ids.insert(()));
        let mut t = Assignments::default();
        t.begin(2);
        t.set(a, 1, Cause::Input);
        assert_eq!((t.get(a), t.get(b), t.cause(a)), (Some(1), None, Cause::Input));
        t.begin(2);
        assert_eq!(t.get(a), None);
        let c = ids.insert(());
        t.set(c, 0, Cause::User);
        assert_eq!(t.get(c), Some(0), "grows past the capacity given to begin");

        let mut copies = CopyTable::default();
        copies.begin(3, 2, 2);
        copies.set(b, b, 1, 1, a);
        assert_eq!((copies.get(b, 1, 1), copies.get(b, 1, 0), copies.get(b, 0, 1)), (Some(a), None, None));
        copies.begin(3, 2, 2);
        assert_eq!(copies.get(b, 1, 1), None);
    }

    #[test]
    fn a_write_in_place_makes_earlier_copies_stale() {
        let mut ids: SlotMap<TensorId, ()> = SlotMap::with_key();
        let (root, view, copy, other) = (ids.insert(()), ids.insert(()), ids.insert(()), ids.insert(()));
        let mut copies = CopyTable::default();
        copies.begin(4, 2, 1);
        copies.set(view, root, 0, 0, copy);
        copies.set(other, other, 0, 0, copy);
        assert_eq!(copies.get_current(view, root, 0, 0), Some(copy));
        copies.record_write(root);
        assert_eq!(copies.get_current(view, root, 0, 0), None, "made before the write");
        assert_eq!(copies.get(view, 0, 0), Some(copy), "still listed");
        assert_eq!(copies.get_current(other, other, 0, 0), Some(copy), "other memory is untouched");
        copies.set(view, root, 0, 0, other);
        assert_eq!(copies.get_current(view, root, 0, 0), Some(other));
        copies.begin(4, 2, 1);
        copies.set(view, root, 0, 0, copy);
        assert_eq!(copies.get_current(view, root, 0, 0), Some(copy), "writes are forgotten by a new run");
    }
}

/// A buffer holding pre-allocated tensors (weights, caches, user memory),
/// with what the scheduler asks of it.
#[derive(Debug, Clone, Copy)]
pub struct PreallocBuffer {
    /// The buffer.
    pub buffer: gantry_arenas::BufferId,
    /// What it holds.
    pub usage: crate::BufferUsage,
    /// Bit `b` set when backend `b` can use its buffer type.
    pub readable: u16,
    /// Whether it is host memory.
    pub is_host: bool,
}

impl PreallocBuffer {
    /// Whether backend `b` can use this buffer.
    #[inline]
    pub fn readable_by(&self, b: u8) -> bool {
        self.readable & (1 << b) != 0
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
    pub fn fill(
        &mut self,
        ctx: &crate::Context,
        graph: crate::Graph<'_>,
        own: &[gantry_arenas::BufferId],
        set: &super::BackendSet,
    ) -> crate::Result<()> {
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
                        let readable = (0..set.len() as u8)
                            .filter(|&b| set.supports_buft(b, entry.buffer_type.as_ref()))
                            .fold(0u16, |m, b| m | 1 << b);
                        self.buffers.push(PreallocBuffer {
                            buffer: p.buffer,
                            usage: entry.usage,
                            readable,
                            is_host: entry.buffer_type.is_host(),
                        });
                        (self.buffers.len() - 1) as u8
                    }
                    None => {
                        return Err(crate::Error::Scheduler(format!(
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
