//! The facts about every tensor a graph touches, in dense columns, gathered
//! in one pass over the graph — the table both the scheduler's systems and
//! the allocator's planner read.
//!
//! Filling it takes three steps:
//! 1. [`TensorTable::gather`] walks the graph once, looking up each
//!    tensor's description once: its role, op kind, flags, view root,
//!    sources, and whether its memory is pre-allocated (in a buffer the
//!    allocator does not own).
//! 2. The memory's buffer type is set per entry ([`TensorTable::set_buft`]):
//!    from the caller's assignment arrays ([`TensorTable::assign_bufts`]),
//!    or by the scheduler, which also appends the tensors it creates (input
//!    copies, dependency markers: [`TensorTable::push_added`]) and sets the
//!    order the planner walks in.
//! 3. [`TensorTable::finish`] adds what depends on the buffer types — sizes,
//!    in-place candidates — and records the plan's inputs in a
//!    [`Fingerprint`]; what only the planner reads (readers and views per
//!    tensor) is counted when a plan is made ([`TensorTable::count_readers`]).
//!
//! Dense indices are given in a fixed order — leafs by position, then nodes
//! by position, then tensors the graph reads without listing them
//! ("extras", in the order they are first read), then tensors added by the
//! scheduler — so the same graph structure always gets the same indices,
//! whichever tensors sit at its positions. That is what lets a plan be
//! reused for a graph rebuilt from new tensors, and lets the scheduler bind
//! a different tensor to a leaf position on each run.

use std::sync::Arc;

use gantry_arenas::keys::slot_index;
use gantry_arenas::{BufferId, Column, TensorId};

use super::BufferTypeIndex;
use super::fingerprint::Fingerprint;
use crate::tensor::MAX_SRC;
use crate::{BufferType, Context, Error, Graph, Op, Result, TensorFlags};

/// "No tensor" in a dense link.
pub(crate) const NONE: u32 = u32::MAX;

/// "Not pre-allocated" in [`TensorTable::external`].
pub(crate) const NOT_EXTERNAL: u8 = u8::MAX;

/// Why a tensor is in the table, and whether the planner walks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub(crate) enum Role {
    /// Given memory before the walk (a listed leaf, a pipeline copy).
    Leaf = 0,
    /// Walked: its sources are read, it gets memory, readers are counted.
    Node = 1,
    /// Read by a node (as a source or view source) without being listed.
    #[default]
    Extra = 2,
}

/// Per-tensor flags (bits of [`TensorTable::flags`]).
pub(crate) mod flag {
    /// A view: its memory is its root's.
    pub(crate) const VIEW: u8 = 1;
    /// Placed in a buffer this allocator does not own: left alone.
    pub(crate) const EXTERNAL: u8 = 2;
    /// A graph input: placed first, never freed, never overwritten in place.
    pub(crate) const INPUT: u8 = 4;
    /// A graph output: never freed, never overwritten in place.
    pub(crate) const OUTPUT: u8 = 8;
    /// A view starting at its root's first byte.
    pub(crate) const AT_ROOT_START: u8 = 16;
    /// Never freed and never reused in place.
    pub(crate) const PROTECTED: u8 = INPUT | OUTPUT;
}

/// What a tensor's op is, as the scheduler's systems ask (bits of
/// [`TensorTable::kind`]).
pub(crate) mod kind {
    /// VIEW, RESHAPE, PERMUTE, TRANSPOSE: describes memory, computes nothing.
    pub(crate) const VIEW_OP: u8 = 1;
    /// Computes something (not NONE, not a view op).
    pub(crate) const COMPUTES: u8 = 2;
    /// ROPE or FLASH_ATTN_EXT: their small side tensors do not decide where they run.
    pub(crate) const SIDE_INPUTS: u8 = 4;
    /// May write its result over its first source (ggml's in-place list).
    pub(crate) const IN_PLACE_OP: u8 = 8;
}

/// Dense per-tensor columns of a gathered graph, one entry per tensor: what
/// the scheduler's systems and the allocator's planner read (see the
/// module docs). Filled and read inside the engine.
#[derive(Default)]
pub struct TensorTable {
    /// Dense index of each tensor slot (`NONE` when not in the table).
    slot_to_dense: Vec<u32>,
    /// What gathering found out about each tensor, one look at its
    /// description (one record per entry: gathering writes them together).
    entries: Vec<Entry>,
    /// Index of its buffer type (the first of equal buffer types).
    pub(crate) buft: Column<BufferTypeIndex>,
    /// Bytes the tensor takes in its buffer type (tensors with memory of their own).
    pub(crate) size: Column<usize>,
    /// Number of source slots of walked nodes that read this tensor.
    pub(crate) children: Column<u32>,
    /// Number of views of this tensor.
    pub(crate) views: Column<u32>,
    /// For nodes: bit `j` set when source `j` may be overwritten in place
    /// (as far as the layout and buffer types go; liveness decides at plan time).
    pub(crate) in_place: Column<u8>,
    /// Position in [`TensorTable::walk`] (`NONE` when not walked).
    walk_pos: Column<u32>,
    /// Whether the entry is queued in `leaf_walk` (bit 0) or `walk` (bit 1)
    /// while the scheduler builds the walk.
    queued: Column<u8>,
    /// Dense index of the tensor at each leaf position of the gathered graph.
    pub(crate) leaf_dense: Column<u32>,
    /// Dense index of the tensor at each node position of the gathered graph.
    pub(crate) node_dense: Column<u32>,
    /// The leafs given memory up front, in order.
    pub(crate) leaf_walk: Column<u32>,
    /// The nodes, in the order the planner walks them.
    pub(crate) walk: Column<u32>,
    /// Every entry in listing order: `leaf_walk`, then `walk`, then the
    /// rest by dense index (inputs get their memory in this order).
    pub(crate) listing: Column<u32>,
    /// The pre-allocated buffers the graph reads (at most 254).
    pub(crate) externals: Vec<BufferId>,
}

/// What gathering records about one tensor: the facts the placement systems
/// read of every entry, side by side so a pass over the entries reads one
/// record per entry ([`TensorTable::entries`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    /// The tensor.
    pub(crate) tensor: TensorId,
    /// Dense indices of the sources (`NONE` where unset).
    pub(crate) srcs: [u32; MAX_SRC],
    /// For views: the dense index of the tensor owning the memory.
    pub(crate) root: u32,
    /// For extras: the dense index of the tensor that first read it.
    pub(crate) first_reader: u32,
    /// Why it is in the table.
    pub(crate) role: Role,
    /// [`kind`] bits of its op.
    pub(crate) kind: u8,
    /// [`flag`] bits.
    pub(crate) flags: u8,
    /// Index into [`TensorTable::externals`] of the buffer holding the
    /// memory (the root's, for a view), or [`NOT_EXTERNAL`].
    pub(crate) external: u8,
}

/// What filling the table needs to know about the allocator.
pub(crate) struct FinishEnv<'a> {
    /// The buffer types, by index.
    pub(crate) buffer_types: &'a [Arc<dyn BufferType>],
    /// For each buffer type index, the first index of an equal buffer type.
    pub(crate) canonical: &'a [BufferTypeIndex],
}

impl TensorTable {
    /// Number of tensors.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entry's facts, by dense index.
    #[inline]
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The dense index of `t`, if it is in the table.
    #[inline]
    pub(crate) fn lookup(&self, t: TensorId) -> Option<u32> {
        let d = *self.slot_to_dense.get(slot_index(t))?;
        (d != NONE && self.entries.get(d as usize).is_some_and(|e| e.tensor == t)).then_some(d)
    }

    /// Entry `d`'s tensor.
    #[inline]
    pub(crate) fn tensor(&self, d: usize) -> TensorId {
        self.entries[d].tensor
    }

    /// The [`kind`] bits of entry `d`'s op.
    #[inline]
    pub(crate) fn kind(&self, d: usize) -> u8 {
        self.entries[d].kind
    }

    /// Entry `d`'s [`flag`] bits.
    #[inline]
    pub(crate) fn flags(&self, d: usize) -> u8 {
        self.entries[d].flags
    }

    /// For a view: the dense index of the tensor owning its memory (`NONE` otherwise).
    #[inline]
    pub(crate) fn root(&self, d: usize) -> u32 {
        self.entries[d].root
    }

    /// Dense indices of entry `d`'s sources (`NONE` where unset).
    #[inline]
    pub(crate) fn srcs(&self, d: usize) -> [u32; MAX_SRC] {
        self.entries[d].srcs
    }

    /// Index into [`TensorTable::externals`] of the buffer holding `d`'s
    /// memory, or [`NOT_EXTERNAL`].
    #[inline]
    pub(crate) fn external(&self, d: usize) -> u8 {
        self.entries[d].external
    }

    /// The tensor owning `d`'s memory: its root, or itself.
    #[inline]
    pub(crate) fn memory_owner(&self, d: usize) -> usize {
        let e = &self.entries[d];
        if e.flags & flag::VIEW != 0 { e.root as usize } else { d }
    }

    /// Each entry's tensor, whether it has memory of its own (neither a
    /// view nor pre-allocated), and its buffer type, in dense order.
    #[inline]
    pub(crate) fn memory_columns(&self) -> impl Iterator<Item = (TensorId, bool, BufferTypeIndex)> + '_ {
        let entries = self.entries.iter().zip(self.buft.as_slice());
        entries.map(|(e, &buft)| (e.tensor, e.flags & (flag::VIEW | flag::EXTERNAL) == 0, buft))
    }

    /// Each entry's memory owner ([`TensorTable::memory_owner`]) and
    /// [`TensorTable::external`] index, in dense order.
    #[inline]
    pub(crate) fn memory_owners(&self) -> impl Iterator<Item = (usize, u8)> + '_ {
        self.entries.iter().enumerate().map(|(d, e)| {
            let owner = if e.flags & flag::VIEW != 0 { e.root as usize } else { d };
            (owner, e.external)
        })
    }

    /// Step 1: fills the table from `graph`. Tensors placed in a live buffer
    /// that is not in `own_buffers` are pre-allocated ([`flag::EXTERNAL`]).
    /// The walk is the graph's: leafs first, then nodes in order.
    pub(crate) fn gather(&mut self, ctx: &Context, graph: Graph<'_>, own_buffers: &[BufferId]) -> Result<()> {
        // Slot indices run up to the capacity inclusive (slotmap keeps slot 0 as a sentinel).
        self.clear(ctx.slot_capacity() + 1);
        for &t in graph.leafs() {
            let (d, new) = self.intern(t, Role::Leaf, NONE);
            self.leaf_dense.push(d);
            if new {
                self.leaf_walk.push(d);
            }
        }
        for &t in graph.nodes() {
            let (d, new) = self.intern(t, Role::Node, NONE);
            self.node_dense.push(d);
            if new {
                self.walk.push(d);
            }
        }
        // Leafs and nodes in order; tensors read without being listed are
        // described as soon as they are met, so a node's sources are always
        // described before the node (in a topologically ordered graph).
        let listed = self.len();
        for d in 0..listed {
            self.describe_entry(ctx, d, own_buffers)?;
        }
        for &t in graph.outputs() {
            if let Some(d) = self.lookup(t) {
                self.entries[d as usize].flags |= flag::OUTPUT;
            }
        }
        self.buft.reset(self.len(), BufferTypeIndex::default());
        self.queued.reset(self.len(), 0);
        for e in &self.entries {
            if e.root != NONE && self.entries[e.root as usize].flags & flag::VIEW != 0 {
                return Err(Error::Allocator(format!(
                    "view {} reads {}, itself a view: a view's source must own its memory",
                    ctx.describe(e.tensor),
                    ctx.describe(self.entries[e.root as usize].tensor)
                )));
            }
        }
        Ok(())
    }

    /// Empties the table (keeping capacity) and sizes the slot map for `slots` slots.
    fn clear(&mut self, slots: usize) {
        for e in &self.entries {
            if let Some(s) = self.slot_to_dense.get_mut(slot_index(e.tensor)) {
                *s = NONE;
            }
        }
        if self.slot_to_dense.len() < slots {
            self.slot_to_dense.resize(slots, NONE);
        }
        self.entries.clear();
        self.buft.clear();
        self.queued.clear();
        self.leaf_dense.clear();
        self.node_dense.clear();
        self.leaf_walk.clear();
        self.walk.clear();
        self.listing.clear();
        self.externals.clear();
    }

    /// The dense index of `t` and whether it is new, adding it with `role` when new.
    #[inline]
    fn intern(&mut self, t: TensorId, role: Role, first_reader: u32) -> (u32, bool) {
        match self.lookup(t) {
            Some(d) => (d, false),
            None => (self.add(t, role, first_reader), true),
        }
    }

    /// Adds `t` (not in the table) with `role`.
    #[inline]
    fn add(&mut self, t: TensorId, role: Role, first_reader: u32) -> u32 {
        let s = slot_index(t);
        if s >= self.slot_to_dense.len() {
            self.grow_slots(s + 1);
        }
        // Entries are distinct tensors of one context, whose slot indices are
        // 32-bit and below u32::MAX: a dense index never reaches `NONE`.
        debug_assert!(self.len() < NONE as usize);
        let d = self.len() as u32;
        self.slot_to_dense[s] = d;
        self.entries.push(Entry {
            tensor: t,
            srcs: [NONE; MAX_SRC],
            root: NONE,
            first_reader,
            role,
            kind: 0,
            flags: 0,
            external: NOT_EXTERNAL,
        });
        // Described next; `buft` and `queued` are sized once gathering ends.
        d
    }

    /// Sizes the slot map for a tensor created after `clear` sized it (the
    /// scheduler's copies).
    #[cold]
    fn grow_slots(&mut self, slots: usize) {
        self.slot_to_dense.resize(slots, NONE);
    }

    /// The dense index of `t`, adding and describing it when new (a tensor
    /// the graph reads without listing it, first read by `reader`).
    #[inline]
    fn intern_extra(&mut self, ctx: &Context, t: TensorId, reader: usize, own: &[BufferId]) -> Result<u32> {
        match self.lookup(t) {
            Some(d) => Ok(d),
            None => self.add_extra(ctx, t, reader, own),
        }
    }

    /// Adds and describes `t`, read by `reader` without being listed (rare:
    /// graphs list what they read), out of the common path.
    #[cold]
    #[inline(never)]
    fn add_extra(&mut self, ctx: &Context, t: TensorId, reader: usize, own: &[BufferId]) -> Result<u32> {
        let d = self.add(t, Role::Extra, reader as u32);
        self.describe_entry(ctx, d as usize, own)?;
        Ok(d)
    }

    /// Records entry `d`'s op kind, flags, view link, sources and whether
    /// its memory is pre-allocated, from one look at its description.
    /// (Inlined into the gathering loop and into [`TensorTable::add_extra`],
    /// its only callers besides [`TensorTable::push_added`].)
    #[inline(always)]
    fn describe_entry(&mut self, ctx: &Context, d: usize, own: &[BufferId]) -> Result<()> {
        let Entry { tensor: t, role, .. } = self.entries[d];
        let desc = ctx.desc(t)?;
        let mut flags = 0;
        if desc.flags.contains(TensorFlags::INPUT) {
            flags |= flag::INPUT;
        }
        if desc.flags.contains(TensorFlags::OUTPUT) {
            flags |= flag::OUTPUT;
        }
        let (mut root, mut external) = (NONE, NOT_EXTERNAL);
        match desc.view_src {
            Some(r) => {
                root = self.intern_extra(ctx, r, d, own)?;
                external = self.entries[root as usize].external;
                flags |= flag::VIEW;
                if desc.view_offset == 0 {
                    flags |= flag::AT_ROOT_START;
                }
            }
            None => {
                if let Some(i) = self.external_buffer(ctx, t, own)? {
                    external = i;
                    flags |= flag::EXTERNAL;
                }
            }
        }
        let mut dense_srcs = [NONE; MAX_SRC];
        if role == Role::Node {
            for (j, dense) in dense_srcs.iter_mut().enumerate() {
                if let Some(s) = desc.srcs[j] {
                    *dense = self.intern_extra(ctx, s, d, own)?;
                }
            }
        }
        let e = &mut self.entries[d];
        e.kind = kind_of(&desc.op);
        e.flags = flags;
        e.root = root;
        e.external = external;
        e.srcs = dense_srcs;
        Ok(())
    }

    /// The index in `externals` of the live buffer holding `t` (not a view)
    /// when it is not one of `own`.
    #[inline(always)]
    fn external_buffer(&mut self, ctx: &Context, t: TensorId, own: &[BufferId]) -> Result<Option<u8>> {
        let Some(p) = ctx.own_placement(t) else { return Ok(None) };
        // Most tensors with memory are the allocator's own from the last run.
        if own.contains(&p.buffer) || ctx.buffer(p.buffer).is_err() {
            return Ok(None);
        }
        if let Some(i) = self.externals.iter().position(|&b| b == p.buffer) {
            return Ok(Some(i as u8));
        }
        self.add_external(p.buffer).map(Some)
    }

    /// Lists a pre-allocated buffer met for the first time.
    #[cold]
    fn add_external(&mut self, buffer: BufferId) -> Result<u8> {
        if self.externals.len() >= NOT_EXTERNAL as usize {
            return Err(Error::Allocator(format!(
                "a graph reading tensors from more than {} pre-allocated buffers",
                NOT_EXTERNAL
            )));
        }
        self.externals.push(buffer);
        Ok((self.externals.len() - 1) as u8)
    }

    /// Step 2, for a graph given with buffer-type arrays: leaf `i` and node
    /// `i` get `leaf_buft[i]` / `node_buft[i]` (index 0 for all when empty),
    /// extras their first reader's.
    pub(crate) fn assign_bufts(
        &mut self,
        ctx: &Context,
        node_buft: &[BufferTypeIndex],
        leaf_buft: &[BufferTypeIndex],
        env: &FinishEnv<'_>,
    ) -> Result<()> {
        check_assignment("node", self.node_dense.as_slice(), node_buft, env, self, ctx)?;
        check_assignment("leaf", self.leaf_dense.as_slice(), leaf_buft, env, self, ctx)?;
        // The first position of an entry decides (leafs before nodes), as when interned.
        for (i, &d) in self.node_dense.as_slice().iter().enumerate().rev() {
            self.buft[d as usize] = env.canonical[node_buft.get(i).copied().unwrap_or_default().get()];
        }
        for (i, &d) in self.leaf_dense.as_slice().iter().enumerate().rev() {
            self.buft[d as usize] = env.canonical[leaf_buft.get(i).copied().unwrap_or_default().get()];
        }
        for d in 0..self.len() {
            let e = self.entries[d];
            if e.role == Role::Extra {
                // Readers come before the tensors they introduce.
                self.buft[d] = self.buft[e.first_reader as usize];
            }
        }
        Ok(())
    }

    /// Sets the buffer type of entry `d`'s memory.
    #[inline]
    pub(crate) fn set_buft(&mut self, d: usize, buft: BufferTypeIndex) {
        self.buft[d] = buft;
    }

    /// Step 2, for the scheduler: appends a tensor it created (an input
    /// copy, a dependency marker) with the given role, described from
    /// `ctx`, and returns its dense index.
    pub(crate) fn push_added(&mut self, ctx: &Context, t: TensorId, role: Role) -> Result<u32> {
        let (d, new) = self.intern(t, role, NONE);
        if !new {
            return Err(Error::Scheduler(format!("{} is in the graph already", ctx.describe(t))));
        }
        self.buft.push(BufferTypeIndex::default());
        self.queued.push(0);
        // Added tensors read only tensors of the table (their sources are listed).
        self.describe_entry(ctx, d as usize, &[])?;
        Ok(d)
    }

    /// Points source slot `j` of node `d` at entry `src` (the scheduler's
    /// rewrite of a source to its copy).
    #[inline]
    pub(crate) fn set_src(&mut self, d: usize, j: usize, src: u32) {
        self.entries[d].srcs[j] = src;
    }

    /// Starts a new walk order (the scheduler's allocator graph).
    pub(crate) fn clear_walk(&mut self) {
        self.leaf_walk.clear();
        self.walk.clear();
        self.queued.as_mut_slice().fill(0);
    }

    /// Queues `d` to get its memory before the walk (once; it becomes a leaf).
    #[inline]
    pub(crate) fn walk_leaf(&mut self, d: usize) {
        if self.queued[d] & 1 == 0 {
            self.queued[d] |= 1;
            self.entries[d].role = Role::Leaf;
            self.leaf_walk.push(d as u32);
        }
    }

    /// Queues `d` as the walk's next node (once; never a leaf queued before).
    #[inline]
    pub(crate) fn walk_node(&mut self, d: usize) {
        if self.queued[d] == 0 {
            self.queued[d] |= 2;
            self.entries[d].role = Role::Node;
            self.walk.push(d as u32);
        }
    }

    /// Step 3: sizes (in each entry's buffer type) and in-place
    /// candidates; then writes the plan's inputs into
    /// `fingerprint` and returns whether they equal the previous ones.
    pub(crate) fn finish(&mut self, ctx: &Context, env: &FinishEnv<'_>, fingerprint: &mut Fingerprint) -> Result<bool> {
        fingerprint.begin();
        let n = self.len();
        self.walk_pos.reset(n, NONE);
        for (i, &d) in self.walk.as_slice().iter().enumerate() {
            self.walk_pos[d as usize] = i as u32;
        }
        // Sizes and in-place candidates, written in entry order.
        self.size.clear();
        self.in_place.clear();
        let (entries, bufts) = (&self.entries, self.buft.as_slice());
        let walk_pos = self.walk_pos.as_slice();
        for (d, (e, buft)) in entries.iter().zip(bufts).enumerate() {
            if e.flags & (flag::VIEW | flag::EXTERNAL) != 0 {
                self.size.push(0);
                self.in_place.push(0);
                continue;
            }
            let Some(buffer_type) = env.buffer_types.get(buft.get()) else {
                return Err(Error::Allocator(format!(
                    "{} is assigned buffer type {}, but the allocator has {}",
                    ctx.describe(e.tensor),
                    buft.get(),
                    env.buffer_types.len()
                )));
            };
            // Dtype, shape and strides are read where they live: the
            // description, looked up only for tensors that take memory.
            let desc = ctx.desc(e.tensor)?;
            self.size.push(buffer_type.alloc_size(&desc.layout()));
            let mut mask = 0;
            if e.kind & kind::IN_PLACE_OP != 0 && walk_pos[d] != NONE {
                let columns = TakeOverColumns { ctx, entries, bufts, walk_pos };
                for (j, &p) in e.srcs.iter().enumerate() {
                    if p != NONE && columns.may_take_over(d, p as usize) {
                        mask |= 1 << j;
                    }
                }
            }
            self.in_place.push(mask);
        }
        self.write_fingerprint(fingerprint);
        Ok(fingerprint.finish())
    }

    /// What the planner reads besides the plan's inputs: readers and views
    /// per entry, and every entry in listing order. They follow from the
    /// columns the fingerprint records, so they are counted only when a plan
    /// is made (a graph placed again with the same plan skips them).
    pub(crate) fn count_readers(&mut self) {
        let n = self.len();
        self.children.reset(n, 0);
        self.views.reset(n, 0);
        let children = self.children.as_mut_slice();
        for &d in self.walk.as_slice() {
            for s in self.entries[d as usize].srcs {
                if let Some(c) = children.get_mut(s as usize) {
                    *c += 1;
                }
            }
        }
        self.listing.clear();
        self.listing.extend_from_slice(self.leaf_walk.as_slice());
        self.listing.extend_from_slice(self.walk.as_slice());
        let views = self.views.as_mut_slice();
        for (d, e) in self.entries.iter().enumerate() {
            if e.role == Role::Extra {
                self.listing.push(d as u32);
            }
            if let Some(v) = views.get_mut(e.root as usize) {
                *v += 1;
            }
        }
    }

    /// Writes the plan's inputs: the list lengths, the lists eight entries
    /// to a block, then one block per entry (role, buffer type, flags and
    /// in-place mask with the view root; the size; the sources).
    fn write_fingerprint(&self, f: &mut Fingerprint) {
        let pair = |a: u32, b: u32| u64::from(a) | (u64::from(b) << 32);
        let lists = [&self.leaf_dense, &self.node_dense, &self.leaf_walk, &self.walk];
        f.extend([[
            pair(self.leaf_dense.len() as u32, self.node_dense.len() as u32),
            pair(self.leaf_walk.len() as u32, self.walk.len() as u32),
            0,
            0,
        ]]);
        for list in lists {
            f.extend(list.as_slice().chunks(8).map(|eight| {
                let at = |i: usize| eight.get(i).copied().unwrap_or(NONE);
                [pair(at(0), at(1)), pair(at(2), at(3)), pair(at(4), at(5)), pair(at(6), at(7))]
            }));
        }
        let columns =
            self.entries.iter().zip(self.buft.as_slice()).zip(self.in_place.as_slice()).zip(self.size.as_slice());
        f.extend(columns.map(|(((e, buft), &in_place), &size)| {
            let head = u32::from(e.role as u8)
                | (buft.get() as u32) << 8
                | u32::from(e.flags) << 16
                | u32::from(in_place) << 24;
            [pair(head, e.root), size as u64, pair(e.srcs[0], e.srcs[1]), pair(e.srcs[2], e.srcs[3])]
        }));
    }
}

/// What deciding an in-place candidate reads (borrowed apart from the
/// columns [`TensorTable::finish`] writes).
struct TakeOverColumns<'a> {
    entries: &'a [Entry],
    bufts: &'a [BufferTypeIndex],
    ctx: &'a Context,
    walk_pos: &'a [u32],
}

impl TakeOverColumns<'_> {
    /// Whether node `d` may take over the memory of its source `p`, as far as
    /// static facts go (ggml's `ggml_are_same_layout` and more): `p` has
    /// `d`'s dtype, shape and strides, its memory is planned here in
    /// `d`'s buffer type, and (for a view) starts at its root's first byte.
    /// A source walked after `d` is never taken over.
    fn may_take_over(&self, d: usize, p: usize) -> bool {
        if self.walk_pos[p] != NONE && self.walk_pos[p] > self.walk_pos[d] {
            return false;
        }
        let ep = &self.entries[p];
        let is_view = ep.flags & flag::VIEW != 0;
        let owner = if is_view { ep.root as usize } else { p };
        self.entries[owner].flags & (flag::EXTERNAL | flag::VIEW) == 0
            && self.bufts[owner] == self.bufts[d]
            && (!is_view || ep.flags & flag::AT_ROOT_START != 0)
            && same_layout(self.ctx, self.entries[p].tensor, self.entries[d].tensor)
    }
}

/// Whether `a` and `b` have the same dtype, shape and strides.
fn same_layout(ctx: &Context, a: TensorId, b: TensorId) -> bool {
    match (ctx.get(a), ctx.get(b)) {
        (Some(a), Some(b)) => a.dtype == b.dtype && a.ne == b.ne && a.nb == b.nb,
        _ => false,
    }
}

/// The [`kind`] bits of `op`.
fn kind_of(op: &Op) -> u8 {
    match op {
        Op::None => 0,
        Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => kind::VIEW_OP,
        Op::Rope(_) | Op::FlashAttnExt { .. } => {
            kind::COMPUTES | kind::SIDE_INPUTS | if op.can_run_in_place() { kind::IN_PLACE_OP } else { 0 }
        }
        _ if op.can_run_in_place() => kind::COMPUTES | kind::IN_PLACE_OP,
        _ => kind::COMPUTES,
    }
}

/// Checks a node or leaf buffer-type assignment: empty (all 0), or one valid
/// index per position.
fn check_assignment(
    what: &str,
    positions: &[u32],
    assignment: &[BufferTypeIndex],
    env: &FinishEnv<'_>,
    table: &TensorTable,
    ctx: &Context,
) -> Result<()> {
    let n_types = env.buffer_types.len();
    if n_types == 0 {
        return Err(Error::Allocator("the graph allocator was created without buffer types".into()));
    }
    if !assignment.is_empty() && assignment.len() != positions.len() {
        return Err(Error::Allocator(format!(
            "{} {what} buffer-type indices given for a graph of {} {what}s",
            assignment.len(),
            positions.len()
        )));
    }
    if let Some(i) = assignment.iter().position(|&b| b.get() >= n_types) {
        return Err(Error::Allocator(format!(
            "{what} {i} ({}) is assigned buffer type {}, but the allocator has {n_types}",
            ctx.describe(table.tensor(positions[i] as usize)),
            assignment[i].get()
        )));
    }
    Ok(())
}
