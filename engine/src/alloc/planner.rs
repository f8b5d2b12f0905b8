//! The liveness walk: places every tensor of a graph at an offset of its
//! buffer type's chunks, reusing memory as soon as nothing reads it any more
//! (ggml's `ggml_gallocr_alloc_graph_impl`, over dense columns).
//!
//! Order of placement:
//! 1. graph inputs, before anything else; they are never freed, so nothing
//!    ever overlaps them (the user, or the scheduler's pipelined copies, may
//!    write them at any time);
//! 2. the other leafs that need memory, in leaf order;
//! 3. each node in order: the sources it reads (tensors the graph does not
//!    list get memory at first use), then the node itself — over a source's
//!    memory when the op runs in place and nothing else needs that source —
//!    then every source whose last reader this was is freed.
//!
//! A view takes no memory: it holds its root alive until its own last reader
//! is done (a view nothing reads lets go right after its node, so the
//! scheduler's dependency views keep a source alive exactly up to their
//! position). Outputs and inputs, and the roots of output or input views,
//! are never freed.

use gantry_arenas::Column;

use super::chunked_allocator::{ChunkAddress, ChunkedAllocator};
use super::tensor_table::{NONE, TensorTable, flag};

/// "Before the first node" / "never", in walk steps.
pub(crate) const STEP_NEVER: u32 = u32::MAX;

/// Where a tensor's memory stands during the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum MemoryState {
    /// Needs memory, has none yet.
    Unplaced,
    /// Holds memory that will be freed after its last reader.
    Live,
    /// Its memory went to a node computed in place over it.
    HandedOver,
    /// Its memory was freed.
    Freed,
    /// Views and pre-allocated tensors: nothing to plan.
    #[default]
    NotPlanned,
}

/// The result of a walk, per dense tensor, plus the walk's scratch.
#[derive(Default)]
pub(crate) struct PlanColumns {
    /// Planned address (tensors with memory of their own).
    pub(crate) addr: Column<ChunkAddress>,
    /// Bytes reserved at `addr` (aligned; after an in-place handover, the node's size).
    pub(crate) reserved: Column<usize>,
    /// Walk step at which the memory was taken: 0 before the first node, `i + 1` at node `i`.
    pub(crate) first_step: Column<u32>,
    /// Walk step after which the memory was freed or handed over (`STEP_NEVER` if kept).
    pub(crate) last_step: Column<u32>,
    /// For nodes computed in place: the dense index of the tensor whose memory they took.
    pub(crate) took_over: Column<u32>,
    state: Column<MemoryState>,
    children_left: Column<u32>,
    views_left: Column<u32>,
}

const NO_ADDRESS: ChunkAddress = ChunkAddress { chunk: u32::MAX, offset: usize::MAX };

impl PlanColumns {
    /// Plans every tensor of `table` in `pools` (indexed by buffer type).
    pub(crate) fn walk(&mut self, table: &TensorTable, pools: &mut [ChunkedAllocator]) {
        for pool in pools.iter_mut() {
            pool.reset();
        }
        let n = table.len();
        self.addr.reset(n, NO_ADDRESS);
        self.reserved.reset(n, 0);
        self.first_step.reset(n, STEP_NEVER);
        self.last_step.reset(n, STEP_NEVER);
        self.took_over.reset(n, NONE);
        self.state.reset(n, MemoryState::NotPlanned);
        self.children_left.clear();
        self.views_left.clear();
        for d in 0..n {
            self.children_left.push(table.children[d]);
            self.views_left.push(table.views[d]);
            if table.flags(d) & (flag::VIEW | flag::EXTERNAL) == 0 {
                self.state[d] = MemoryState::Unplaced;
            }
        }
        let mut walk = Walk { table, pools, plan: self, step: 0 };

        for &d in table.listing.as_slice() {
            if table.flags(d as usize) & flag::INPUT != 0 {
                walk.ensure_memory(d as usize);
            }
        }
        for &d in table.leaf_walk.as_slice() {
            walk.ensure_memory(d as usize);
        }
        // Leaf views nothing reads hold their root for no one.
        for &d in table.leaf_walk.as_slice() {
            let d = d as usize;
            if table.flags(d) & flag::VIEW != 0 && table.children[d] == 0 {
                walk.release(d);
            }
        }
        for &d in table.walk.as_slice() {
            walk.step += 1;
            walk.compute_node(d as usize);
        }
    }
}

/// One walk over the table.
struct Walk<'a> {
    table: &'a TensorTable,
    pools: &'a mut [ChunkedAllocator],
    plan: &'a mut PlanColumns,
    step: u32,
}

impl Walk<'_> {
    /// Gives `d` (or, for a view, its root) memory if it has none yet.
    fn ensure_memory(&mut self, d: usize) {
        let owner = self.memory_owner(d);
        if self.plan.state[owner] == MemoryState::Unplaced {
            self.take_fresh(owner);
        }
    }

    /// The tensor whose memory `d` uses.
    fn memory_owner(&self, d: usize) -> usize {
        self.table.memory_owner(d)
    }

    fn take_fresh(&mut self, d: usize) {
        let pool = &mut self.pools[self.table.buft[d].get()];
        let size = self.table.size[d];
        self.plan.addr[d] = pool.alloc(size);
        self.plan.reserved[d] = pool.aligned(size);
        self.plan.first_step[d] = self.step;
        self.plan.state[d] = MemoryState::Live;
    }

    fn compute_node(&mut self, d: usize) {
        let srcs = self.table.srcs(d);
        for &s in &srcs {
            if s != NONE {
                self.ensure_memory(s as usize);
            }
        }
        if self.plan.state[d] == MemoryState::Unplaced {
            if !self.take_over_source(d) {
                self.take_fresh(d);
            }
        } else {
            // A view (its root needs memory) or a tensor placed already.
            self.ensure_memory(d);
        }
        for &s in &srcs {
            if s == NONE {
                continue;
            }
            let s = s as usize;
            self.plan.children_left[s] -= 1;
            if self.plan.children_left[s] == 0 && self.plan.views_left[s] == 0 {
                self.release(s);
            }
        }
        // A view that nothing reads (a dependency, or a write into its root
        // like SET_ROWS whose result is unused) stops holding its root now.
        if self.table.flags(d) & flag::VIEW != 0 && self.table.children[d] == 0 {
            self.release(d);
        }
    }

    /// Computes node `d` over the memory of a source that nothing else needs.
    fn take_over_source(&mut self, d: usize) -> bool {
        let table = self.table;
        let candidates = table.in_place[d];
        if candidates == 0 {
            return false;
        }
        for j in 0..table.srcs(d).len() {
            if candidates & (1 << j) == 0 {
                continue;
            }
            let p = table.srcs(d)[j] as usize;
            if table.flags(p) & flag::PROTECTED != 0 || self.plan.children_left[p] != 1 || self.plan.views_left[p] != 0
            {
                continue;
            }
            let owner = self.memory_owner(p);
            if owner != p && (self.plan.views_left[owner] != 1 || self.plan.children_left[owner] != 0) {
                continue;
            }
            if table.flags(owner) & flag::PROTECTED != 0
                || self.plan.state[owner] != MemoryState::Live
                || table.size[owner] < table.size[d]
            {
                continue;
            }
            let at = self.plan.addr[owner];
            let pool = &mut self.pools[table.buft[owner].get()];
            pool.shrink(at, self.plan.reserved[owner], table.size[d]);
            self.plan.addr[d] = at;
            self.plan.reserved[d] = pool.aligned(table.size[d]);
            self.plan.first_step[d] = self.step;
            self.plan.state[d] = MemoryState::Live;
            self.plan.took_over[d] = owner as u32;
            self.plan.state[owner] = MemoryState::HandedOver;
            self.plan.last_step[owner] = self.step;
            return true;
        }
        false
    }

    /// `d` has no readers left: free its memory (or, for a view, drop its hold on its root).
    fn release(&mut self, d: usize) {
        if self.table.flags(d) & flag::PROTECTED != 0 {
            return;
        }
        if self.table.flags(d) & flag::VIEW != 0 {
            let root = self.table.root(d) as usize;
            self.plan.views_left[root] -= 1;
            if self.plan.views_left[root] == 0 && self.plan.children_left[root] == 0 {
                self.free(root);
            }
        } else {
            self.free(d);
        }
    }

    fn free(&mut self, d: usize) {
        if self.plan.state[d] != MemoryState::Live || self.table.flags(d) & flag::PROTECTED != 0 {
            return;
        }
        self.pools[self.table.buft[d].get()].free(self.plan.addr[d], self.plan.reserved[d]);
        self.plan.state[d] = MemoryState::Freed;
        self.plan.last_step[d] = self.step;
    }
}
