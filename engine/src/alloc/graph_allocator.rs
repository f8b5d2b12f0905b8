//! The graph allocator: plans a graph's memory per buffer type, sizes the
//! buffers, and binds every tensor to its planned offset.

use std::sync::Arc;

use gantry_arenas::{BufferId, TensorId};
use smallvec::SmallVec;

use super::BufferTypeIndex;
use super::chunked_allocator::{ChunkAddress, ChunkedAllocator};
use super::fingerprint::Fingerprint;
use super::planner::{PlanColumns, STEP_NEVER};
use super::tensor_table::{FinishEnv, NONE, TensorTable, flag};
use crate::{BufferType, BufferUsage, Context, Error, Graph, Placement, Result, same_buffer_type};

/// Bytes a plan needs, per buffer type and per chunk (one buffer each).
///
/// A buffer type given to the allocator more than once shares the planner
/// and the buffers of its first occurrence; its later occurrences report no
/// chunks, so that totals are not counted twice (as ggml does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanSizes {
    chunks: SmallVec<[SmallVec<[usize; 2]>; 4]>,
}

impl PlanSizes {
    /// Number of buffer types.
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    /// Whether there are no buffer types.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Total bytes for buffer type `buft` (0 when out of range).
    pub fn total(&self, buft: BufferTypeIndex) -> usize {
        self.chunks(buft).iter().sum()
    }

    /// Bytes of each chunk (buffer) of buffer type `buft`.
    pub fn chunks(&self, buft: BufferTypeIndex) -> &[usize] {
        self.chunks.get(buft.get()).map_or(&[], |c| c.as_slice())
    }

    /// Total bytes over every buffer type.
    pub fn grand_total(&self) -> usize {
        self.chunks.iter().flatten().sum()
    }
}

/// What the allocator's buffers will be once grown for a new plan, shown
/// before anything is allocated (the scheduler checks memory budgets here).
#[derive(Debug, Clone, Copy)]
pub struct BufferGrowth<'a> {
    /// Bytes of each buffer type's buffers after growing, by
    /// [`BufferTypeIndex`] (0 for a repeated buffer type).
    pub bytes_after: &'a [usize],
    /// The allocator's buffers now (those the growth replaces are among them).
    pub own_buffers: &'a [BufferId],
}

/// Where the plan put one tensor (for diagnostics and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedTensor {
    /// The tensor.
    pub tensor: TensorId,
    /// Its buffer type (the first index of an equal buffer type).
    pub buffer_type: BufferTypeIndex,
    /// Index of the chunk (buffer) of that buffer type.
    pub chunk: usize,
    /// Byte offset in the chunk.
    pub offset: usize,
    /// Bytes reserved (the buffer type's allocation size, rounded up to its alignment).
    pub size: usize,
    /// Walk step at which the memory is taken: 0 before the first node, `i + 1` at node `i`.
    pub first_step: u32,
    /// Walk step after which it is free again (`u32::MAX`: never).
    pub last_step: u32,
    /// For a node computed in place: the tensor whose memory it took.
    pub in_place_of: Option<TensorId>,
}

/// Plans a graph's memory with reuse, allocates the buffers it needs, and
/// binds tensors to their planned offsets (ggml's `ggml_gallocr`).
///
/// One best-fit planner per buffer type; tensors are placed in graph order
/// and their memory is reused as soon as their last reader is done. Views
/// take no memory; inputs are placed first and never overlap anything;
/// outputs are never freed; tensors already placed in a buffer the allocator
/// does not own (weights, user buffers) are left alone, while tensors in its
/// own buffers are re-bound on every call.
///
/// All scratch is kept between calls: allocating the same graph again makes
/// no heap allocation, and the plan is recomputed only when the graph's
/// structure, a size, a flag or a buffer-type assignment changed.
///
/// ```
/// use std::sync::Arc;
/// use gantry_arenas::GraphArena;
/// use gantry_engine::{BufferType, Context, DType, alloc::{BufferTypeIndex, GraphAllocator}, testing::TestBufferType};
///
/// let buft: Arc<dyn BufferType> = TestBufferType::host("host", 32).shared();
/// let mut ctx = Context::new();
/// let x = ctx.tensor(DType::F32, [256])?;
/// ctx.set_input(x)?;
/// let a = ctx.silu(x)?;
/// let b = ctx.neg(a)?;
/// let c = ctx.exp(b)?;
/// let arena = GraphArena::new();
/// let graph = ctx.build_graph(&arena, &[c])?;
///
/// let mut allocator = GraphAllocator::new(&[buft]);
/// allocator.alloc_graph(&mut ctx, graph, &[], &[])?;
/// // x (an input: kept, never overwritten), a; NEG and EXP run in place over a.
/// assert_eq!(allocator.buffer_size(BufferTypeIndex::new(0)), 2 * 1024);
/// assert_eq!(ctx.placement(c), ctx.placement(a));
/// assert!(ctx.is_allocated(c));
/// # Ok::<(), gantry_engine::Error>(())
/// ```
pub struct GraphAllocator {
    buffer_types: Vec<Arc<dyn BufferType>>,
    /// For each buffer type index, the first index of an equal buffer type.
    canonical: Vec<BufferTypeIndex>,
    /// One planner per buffer type index (only canonical ones are used).
    pools: Vec<ChunkedAllocator>,
    /// The chunk buffers of each buffer type index (only canonical ones are used).
    buffers: Vec<SmallVec<[BufferId; 2]>>,
    /// The size requested for each buffer in `buffers`.
    buffer_sizes: Vec<SmallVec<[usize; 2]>>,
    /// Every buffer in `buffers`, flat, for "is this one of ours" checks.
    own_buffers: Vec<BufferId>,
    table: TensorTable,
    plan: PlanColumns,
    fingerprint: Fingerprint,
    /// Whether `plan` was computed from the inputs recorded in `fingerprint`.
    plan_valid: bool,
    /// More buffer types than a [`BufferTypeIndex`] reaches (reported when planning).
    too_many_types: bool,
    /// Number of plans computed so far.
    plans: u64,
}

impl GraphAllocator {
    /// An allocator for graphs whose tensors live in `buffer_types` (at most
    /// [`BufferTypeIndex::MAX`]; node and leaf assignments index this list).
    pub fn new(buffer_types: &[Arc<dyn BufferType>]) -> Self {
        let n = buffer_types.len();
        let canonical: Vec<BufferTypeIndex> = (0..n)
            .map(|i| {
                let first = (0..i).find(|&j| same_buffer_type(&buffer_types[i], &buffer_types[j])).unwrap_or(i);
                BufferTypeIndex::new(first)
            })
            .collect();
        let pools = buffer_types.iter().map(|b| ChunkedAllocator::new(b.alignment(), b.max_size())).collect();
        Self {
            buffer_types: buffer_types.to_vec(),
            canonical,
            pools,
            buffers: vec![SmallVec::new(); n],
            buffer_sizes: vec![SmallVec::new(); n],
            own_buffers: Vec::new(),
            table: TensorTable::default(),
            plan: PlanColumns::default(),
            fingerprint: Fingerprint::default(),
            plan_valid: false,
            too_many_types: n > BufferTypeIndex::MAX,
            plans: 0,
        }
    }

    /// How many plans this allocator has computed (a graph whose plan is
    /// reused does not count): for tests and diagnostics.
    pub fn plans_computed(&self) -> u64 {
        self.plans
    }

    /// The buffer types, by index.
    pub fn buffer_types(&self) -> &[Arc<dyn BufferType>] {
        &self.buffer_types
    }

    /// Dry run: plans `graph` and returns the bytes each buffer type (and
    /// each of its chunks) needs. Nothing is allocated or bound.
    ///
    /// `node_buft[i]` / `leaf_buft[i]` is the index of the buffer type of
    /// node / leaf `i`; an empty slice means buffer type 0 for all.
    pub fn plan(
        &mut self,
        ctx: &Context,
        graph: Graph<'_>,
        node_buft: &[BufferTypeIndex],
        leaf_buft: &[BufferTypeIndex],
    ) -> Result<PlanSizes> {
        self.gather(ctx, graph, node_buft, leaf_buft)?;
        self.walk();
        Ok(self.planned_sizes())
    }

    /// Plans `graph` and (re)allocates the buffers so that they hold the plan
    /// (buffers only grow); returns the bytes each buffer type needs for it.
    /// A later [`GraphAllocator::alloc_graph`] of a graph whose plan fits
    /// these buffers allocates no buffer.
    pub fn reserve(
        &mut self,
        ctx: &mut Context,
        graph: Graph<'_>,
        node_buft: &[BufferTypeIndex],
        leaf_buft: &[BufferTypeIndex],
    ) -> Result<PlanSizes> {
        let sizes = self.plan(ctx, graph, node_buft, leaf_buft)?;
        self.grow_buffers(ctx)?;
        Ok(sizes)
    }

    /// Binds every tensor of `graph` that needs memory to its planned offset.
    /// The plan is recomputed only when the graph's structure, a tensor's
    /// size or flags, or the buffer-type assignment changed; buffers are
    /// (re)allocated only when the plan outgrows them.
    pub fn alloc_graph(
        &mut self,
        ctx: &mut Context,
        graph: Graph<'_>,
        node_buft: &[BufferTypeIndex],
        leaf_buft: &[BufferTypeIndex],
    ) -> Result<()> {
        self.alloc_graph_with(ctx, graph, node_buft, leaf_buft, || Ok(())).map(drop)
    }

    /// [`GraphAllocator::alloc_graph`], calling `before_moving` first when
    /// tensors may move (a new plan, or a buffer to (re)allocate) so that the
    /// caller can wait for whatever still runs on the old placement. Returns
    /// whether they could move. The graph is examined once.
    pub fn alloc_graph_with(
        &mut self,
        ctx: &mut Context,
        graph: Graph<'_>,
        node_buft: &[BufferTypeIndex],
        leaf_buft: &[BufferTypeIndex],
        before_moving: impl FnOnce() -> Result<()>,
    ) -> Result<bool> {
        let same = self.gather(ctx, graph, node_buft, leaf_buft)?;
        self.plan_and_bind(ctx, same, before_moving, |_: &Context, _: &BufferGrowth<'_>| Ok(()))
    }

    /// Plans again unless the plan's inputs are `same` as last time's, grows
    /// the buffers (after `before_growing` agreed), binds; returns whether
    /// tensors could move.
    fn plan_and_bind(
        &mut self,
        ctx: &mut Context,
        same: bool,
        before_moving: impl FnOnce() -> Result<()>,
        before_growing: impl FnOnce(&Context, &BufferGrowth<'_>) -> Result<()>,
    ) -> Result<bool> {
        let replan = !(same && self.plan_valid);
        if replan {
            self.walk();
        }
        let holds = self.buffers_hold_plan(ctx);
        if !holds {
            self.check_growth(ctx, before_growing)?;
        }
        let moving = replan || !holds;
        if moving {
            before_moving()?;
        }
        self.grow_buffers(ctx)?;
        if moving {
            // The buffers are reused for a new plan: their per-tensor state
            // goes (ggml resets a buffer before placing a graph in it), and
            // every tensor is placed (and initialized) again.
            for &id in &self.own_buffers {
                if let Ok(entry) = ctx.buffer(id) {
                    entry.buffer.reset();
                }
            }
        }
        self.bind(ctx, moving)?;
        Ok(moving)
    }

    /// Whether [`GraphAllocator::alloc_graph`] of this graph would plan
    /// again or (re)allocate a buffer — in which case tensors may move, so
    /// whatever still runs on the old placement must be waited for first.
    /// An invalid graph answers `true` (`alloc_graph` then reports the error).
    pub fn needs_replan(
        &mut self,
        ctx: &Context,
        graph: Graph<'_>,
        node_buft: &[BufferTypeIndex],
        leaf_buft: &[BufferTypeIndex],
    ) -> bool {
        match self.gather(ctx, graph, node_buft, leaf_buft) {
            Ok(true) if self.plan_valid => !self.buffers_hold_plan(ctx),
            Ok(_) => {
                // The record now holds this graph: mark the plan stale so the
                // next `alloc_graph` (which will find the record equal) plans.
                self.plan_valid = false;
                true
            }
            Err(_) => true,
        }
    }

    /// Frees every buffer this allocator holds in `ctx` (tensors bound to
    /// them become unallocated) and drops the plan. The buffers live in the
    /// context, so an allocator that is no longer needed should be released
    /// (or its context dropped) to give the memory back.
    pub fn release(&mut self, ctx: &mut Context) {
        for id in self.buffers.iter_mut().flat_map(|chunks| chunks.drain(..)) {
            // A buffer the user freed already is fine: it is gone either way.
            let _ = ctx.free_buffer(id);
        }
        self.buffer_sizes.iter_mut().for_each(SmallVec::clear);
        self.own_buffers.clear();
        self.forget_plan();
    }

    /// Drops the current plan, so that the next `alloc_graph` plans again
    /// even for an unchanged graph (buffers are kept).
    pub fn forget_plan(&mut self) {
        self.fingerprint.invalidate();
        self.plan_valid = false;
    }

    /// Bytes allocated for buffer type `buft`, over all its chunks (0
    /// for a repeated buffer type, whose buffers are its first occurrence's,
    /// and for an index out of range).
    pub fn buffer_size(&self, buft: BufferTypeIndex) -> usize {
        if !self.is_canonical(buft.get()) {
            return 0;
        }
        self.buffer_sizes[buft.get()].iter().sum()
    }

    /// Every buffer this allocator holds (all buffer types, all chunks).
    pub fn own_buffers(&self) -> &[BufferId] {
        &self.own_buffers
    }

    /// Whether buffer type `b` is the first of its equals (the one that
    /// owns the planner and buffers).
    fn is_canonical(&self, b: usize) -> bool {
        self.canonical.get(b).is_some_and(|c| c.get() == b)
    }

    /// The buffers (one per chunk) of buffer type `buft`; a repeated
    /// buffer type returns its first occurrence's.
    pub fn buffers(&self, buft: BufferTypeIndex) -> &[BufferId] {
        match self.canonical.get(buft.get()) {
            Some(&c) => &self.buffers[c.get()],
            None => &[],
        }
    }

    /// The bytes the current plan needs per buffer type.
    pub fn planned_sizes(&self) -> PlanSizes {
        let chunks = (0..self.buffer_types.len())
            .map(|b| {
                if !self.is_canonical(b) || !self.plan_valid {
                    return SmallVec::new();
                }
                let pool = &self.pools[b];
                (0..pool.n_chunks()).map(|c| pool.chunk_size(c)).collect()
            })
            .collect();
        PlanSizes { chunks }
    }

    /// Where the current plan puts each tensor that gets memory from this
    /// allocator, in plan order (leafs, nodes, then tensors read but not listed).
    pub fn planned_tensors(&self) -> impl Iterator<Item = PlannedTensor> + '_ {
        let n = if self.plan_valid { self.table.len() } else { 0 };
        (0..n).filter(|&d| self.table.flags(d) & (flag::VIEW | flag::EXTERNAL) == 0).map(move |d| {
            let took = self.plan.took_over[d];
            PlannedTensor {
                tensor: self.table.tensor(d),
                buffer_type: self.table.buft[d],
                chunk: self.plan.addr[d].chunk as usize,
                offset: self.plan.addr[d].offset,
                size: self.plan.reserved[d],
                first_step: self.plan.first_step[d],
                last_step: self.plan.last_step[d],
                in_place_of: (took != NONE).then(|| self.table.tensor(took as usize)),
            }
        })
    }

    // ---- steps ------------------------------------------------------------------

    fn gather(
        &mut self,
        ctx: &Context,
        graph: Graph<'_>,
        node_buft: &[BufferTypeIndex],
        leaf_buft: &[BufferTypeIndex],
    ) -> Result<bool> {
        let result = self.check_types().and_then(|()| {
            self.table.gather(ctx, graph, &self.own_buffers)?;
            let env = FinishEnv { buffer_types: &self.buffer_types, canonical: &self.canonical };
            self.table.assign_bufts(ctx, node_buft, leaf_buft, &env)?;
            self.table.finish(ctx, &env, &mut self.fingerprint)
        });
        if result.is_err() {
            self.fingerprint.invalidate();
            self.plan_valid = false;
        }
        result
    }

    fn check_types(&self) -> Result<()> {
        if self.too_many_types {
            return Err(Error::Allocator(format!(
                "{} buffer types given; the graph allocator handles at most {}",
                self.buffer_types.len(),
                BufferTypeIndex::MAX
            )));
        }
        Ok(())
    }

    // ---- the scheduler's path: it gathers, the allocator plans ------------------

    /// The table for the scheduler to gather a graph into (with the
    /// allocator's own buffers, whose tensors are not pre-allocated), set
    /// buffer types and the walk order in, and hand back with
    /// [`GraphAllocator::alloc_gathered`] or [`GraphAllocator::reserve_gathered`].
    pub(crate) fn table_mut(&mut self) -> (&mut TensorTable, &[BufferId]) {
        (&mut self.table, &self.own_buffers)
    }

    /// The table as last gathered (the scheduler's placement reads it
    /// through its dense indices).
    pub(crate) fn table(&self) -> &TensorTable {
        &self.table
    }

    /// Finishes the gathered table: sizes, readers, the plan's record.
    fn finish_gathered(&mut self, ctx: &Context) -> Result<bool> {
        let result = self.check_types().and_then(|()| {
            let env = FinishEnv { buffer_types: &self.buffer_types, canonical: &self.canonical };
            self.table.finish(ctx, &env, &mut self.fingerprint)
        });
        if result.is_err() {
            self.fingerprint.invalidate();
            self.plan_valid = false;
        }
        result
    }

    /// [`GraphAllocator::reserve`] of the table the caller gathered; the
    /// buffers grow only after `before_growing` agreed (a memory budget).
    pub(crate) fn reserve_gathered(
        &mut self,
        ctx: &mut Context,
        before_growing: impl FnOnce(&Context, &BufferGrowth<'_>) -> Result<()>,
    ) -> Result<PlanSizes> {
        self.finish_gathered(ctx)?;
        self.walk();
        self.check_growth(ctx, before_growing)?;
        self.grow_buffers(ctx)?;
        Ok(self.planned_sizes())
    }

    /// [`GraphAllocator::alloc_graph_with`] of the table the caller
    /// gathered; buffers grow only after `before_growing` agreed.
    pub(crate) fn alloc_gathered(
        &mut self,
        ctx: &mut Context,
        before_moving: impl FnOnce() -> Result<()>,
        before_growing: impl FnOnce(&Context, &BufferGrowth<'_>) -> Result<()>,
    ) -> Result<bool> {
        let same = self.finish_gathered(ctx)?;
        self.plan_and_bind(ctx, same, before_moving, before_growing)
    }

    /// Asks `before_growing` about the buffers the plan needs (nothing is
    /// allocated yet), so that a caller can refuse before any memory moves.
    fn check_growth(
        &self,
        ctx: &Context,
        before_growing: impl FnOnce(&Context, &BufferGrowth<'_>) -> Result<()>,
    ) -> Result<()> {
        let after: SmallVec<[usize; 4]> = (0..self.buffer_types.len())
            .map(|b| {
                if !self.is_canonical(b) {
                    return 0;
                }
                (0..self.pools[b].n_chunks())
                    .map(|c| {
                        let current =
                            self.buffers[b].get(c).and_then(|&id| ctx.buffer(id).ok()).map(|e| e.buffer.size());
                        current.unwrap_or(0).max(self.pools[b].chunk_size(c))
                    })
                    .sum()
            })
            .collect();
        before_growing(ctx, &BufferGrowth { bytes_after: &after, own_buffers: &self.own_buffers })
    }

    fn walk(&mut self) {
        self.table.count_readers();
        self.plan.walk(&self.table, &mut self.pools);
        self.plan_valid = true;
        self.plans += 1;
    }

    /// Whether every chunk of the plan has a live buffer at least as large.
    fn buffers_hold_plan(&self, ctx: &Context) -> bool {
        (0..self.buffer_types.len()).filter(|&b| self.is_canonical(b)).all(|b| {
            (0..self.pools[b].n_chunks()).all(|c| {
                self.buffers[b].get(c).and_then(|&id| ctx.buffer(id).ok()).map(|e| e.buffer.size())
                    >= Some(self.pools[b].chunk_size(c))
            })
        })
    }

    /// Allocates a buffer for every chunk of the plan that has none or a
    /// smaller one (freeing the one it replaces first).
    fn grow_buffers(&mut self, ctx: &mut Context) -> Result<()> {
        let mut changed = false;
        for b in 0..self.buffer_types.len() {
            if !self.is_canonical(b) {
                continue;
            }
            for c in 0..self.pools[b].n_chunks() {
                let needed = self.pools[b].chunk_size(c);
                let current = self.buffers[b].get(c).and_then(|&id| ctx.buffer(id).ok()).map(|e| e.buffer.size());
                if current.is_some_and(|size| size >= needed) {
                    continue;
                }
                changed = true;
                if let Some(&old) = self.buffers[b].get(c) {
                    // A stale id (freed by the user) is fine: it is replaced either way.
                    let _ = ctx.free_buffer(old);
                }
                let buft = &self.buffer_types[b];
                let id = ctx.alloc_buffer(buft, needed, BufferUsage::Compute).map_err(|e| match e {
                    Error::OutOfMemory { .. } => e,
                    other => Error::Allocator(format!(
                        "allocating chunk {c} of {} bytes for buffer type {}: {other}",
                        needed,
                        buft.name()
                    )),
                })?;
                if c < self.buffers[b].len() {
                    self.buffers[b][c] = id;
                    self.buffer_sizes[b][c] = needed;
                } else {
                    self.buffers[b].push(id);
                    self.buffer_sizes[b].push(needed);
                }
            }
        }
        if changed {
            self.own_buffers.clear();
            self.own_buffers.extend(self.buffers.iter().flatten().copied());
        }
        Ok(())
    }

    /// Places every tensor the plan gives memory at its planned offset
    /// (`all`: also those already there, after their buffers were reset).
    fn bind(&self, ctx: &mut Context, all: bool) -> Result<()> {
        // Consecutive tensors mostly share a chunk: its buffer is looked up once.
        let mut last_chunk: Option<(usize, u32, BufferId)> = None;
        let planned = self.plan.first_step.as_slice().iter().zip(self.plan.addr.as_slice());
        for ((t, has_memory, buft), (&first_step, &addr)) in self.table.memory_columns().zip(planned) {
            if !has_memory {
                continue;
            }
            if first_step == STEP_NEVER {
                // The walk never reached it (a source the scheduler replaced
                // by its copy): it keeps whatever memory it had.
                continue;
            }
            let ChunkAddress { chunk, offset } = addr;
            let b = buft.get();
            let buffer = match last_chunk {
                Some((lb, lc, buffer)) if (lb, lc) == (b, chunk) => buffer,
                _ => {
                    let buffer = *self.buffers[b].get(chunk as usize).ok_or_else(|| {
                        Error::Allocator(format!(
                            "tensor {} is planned in chunk {chunk} of {}, which has no buffer",
                            ctx.describe(t),
                            self.buffer_types[b].name()
                        ))
                    })?;
                    last_chunk = Some((b, chunk, buffer));
                    buffer
                }
            };
            // (No view has memory of its own: its placement is its own.)
            if !all && ctx.own_placement(t) == Some(Placement { buffer, offset }) {
                // Bound by the last call (a graph computed again): nothing moves.
                continue;
            }
            ctx.place(t, buffer, offset).map_err(|e| {
                Error::Allocator(format!(
                    "binding tensor {} to {} chunk {chunk} at {offset}: {e}",
                    ctx.describe(t),
                    self.buffer_types[b].name()
                ))
            })?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for GraphAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphAllocator")
            .field("buffer_types", &self.buffer_types.iter().map(|b| b.name()).collect::<Vec<_>>())
            .field("buffers", &self.buffers)
            .field("planned", &self.planned_sizes())
            .finish()
    }
}
