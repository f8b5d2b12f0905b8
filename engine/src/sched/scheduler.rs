//! The scheduler's lifecycle: reserve, alloc, compute, reset.

use std::sync::Arc;

use gantry_arenas::{EventId, TensorId};

use super::alloc::{PipelineRotation, RotationInputs, alloc_placed, reserve_placed};
use super::budget::{Budgets, MemoryReport, memory_report};
use super::compute::{ComputeInputs, EvalCallback, compute_splits};
use super::describe::{debug_level_from_env, describe_splits};
use super::expert_copy::ExpertScratch;
use super::graphviz::to_dot;
use super::optimize::{FusedGroup, fusion_from_env};
use super::pipeline::next_copy;
use super::placement::{PlacementInputs, RunTables, place_graph};
use super::plans::SplitPlans;
use super::profiled::SchedProfile;
use super::reuse::PlacedGraph;
use super::split::{Split, SplitParams};
use super::tables::Pins;
use super::{BackendIndex, BackendSet};
use crate::alloc::{BufferTypeIndex, GraphAllocator};
use crate::profile::Profiler;
use crate::{AbortCallback, Backend, BufferType, Context, Error, Graph, MAX_SRC, Result};

/// How a [`Scheduler`] is set up.
#[derive(Clone)]
pub struct SchedulerParams {
    /// A buffer type per backend for its compute memory; `None` (or an
    /// empty list) takes the device's own.
    pub buffer_types: Vec<Option<Arc<dyn BufferType>>>,
    /// Nodes a graph is expected to have (pre-sizes the tables).
    pub graph_size: usize,
    /// Pipeline copies: with more than 1, inputs of consecutive computes use
    /// different memory so a backend can start the next one early. 1 to 8.
    pub n_copies: usize,
    /// Let a higher-priority backend take ops whose weights are in host memory
    /// when it asks to (`Device::offload_op`).
    pub op_offload: bool,
    /// Inputs one split copies in before a new split starts (at least 4).
    pub max_split_inputs: usize,
    /// A memory budget in bytes per backend (priority order; empty: none):
    /// everything on the backend's device — weights, caches, compute memory
    /// — may not pass it. Checked before compute memory grows
    /// ([`Error::BudgetExceeded`]); see [`super::budget`].
    pub budgets: Vec<Option<usize>>,
    /// Let each backend rewrite its splits before memory is planned (the
    /// optimize system: reordering and fused groups, see
    /// [`super::optimize`]). On by default; [`SchedulerParams::from_env`]
    /// turns it off for `GANTRY_NO_FUSION=1`.
    pub graph_optimize: bool,
    /// Describe each new placement in words ([`super::describe`]): 0 off
    /// (the default), 1 every split, 2 every node too. Printed as an info
    /// event of target `gantry::sched` when the program has a `tracing`
    /// subscriber, else to stderr. [`SchedulerParams::from_env`] reads it
    /// from `GANTRY_SCHED_DEBUG`.
    pub debug: u8,
}

impl Default for SchedulerParams {
    /// The defaults, whatever the environment says (see
    /// [`SchedulerParams::from_env`] for the switches a program may honour).
    fn default() -> Self {
        Self {
            buffer_types: Vec::new(),
            graph_size: 4096,
            n_copies: 1,
            op_offload: true,
            max_split_inputs: 30,
            budgets: Vec::new(),
            graph_optimize: true,
            debug: 0,
        }
    }
}

impl SchedulerParams {
    /// The defaults with the scheduler's environment switches applied, for
    /// programs that want them (the `gantry` command does):
    ///
    /// - `GANTRY_NO_FUSION`: set to anything but empty or `0`, turns
    ///   [`SchedulerParams::graph_optimize`] off.
    /// - `GANTRY_SCHED_DEBUG`: `1` or `2` sets [`SchedulerParams::debug`].
    ///
    /// Nothing else in the engine reads the environment.
    pub fn from_env() -> Self {
        Self { graph_optimize: fusion_from_env(), debug: debug_level_from_env(), ..Self::default() }
    }
}

/// Most pipeline copies.
pub const MAX_COPIES: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing placed.
    Reset,
    /// Placed and allocated, not yet computed: inputs may be written now.
    Allocated,
    /// Computed at least once since it was placed.
    Computed,
}

/// Runs one graph across several backends (ggml's `ggml_backend_sched`).
///
/// Backends come in priority order, the CPU last. Each run goes through the
/// systems of [`crate::sched`]: assign, expand, split, optimize, alloc, compute. A graph
/// computed again with the same shapes and placement is not re-planned, and
/// the whole run makes no heap allocation.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use gantry_engine::{Backend, Context, GraphArena, Result};
/// # use gantry_engine::sched::{Scheduler, SchedulerParams};
/// # fn demo(backends: &[Arc<dyn Backend>], ctx: &mut Context, arena: &GraphArena, out: gantry_engine::TensorId) -> Result<()> {
/// let mut sched = Scheduler::new(backends, SchedulerParams::default())?;
/// let graph = ctx.build_graph(arena, &[out])?;
/// let memory = sched.reserve(ctx, graph)?;  // compute memory per backend, up front
/// println!("{memory}");                     // and what each device holds besides
/// sched.graph_compute(ctx, graph)?;         // split, allocate, copy inputs, compute
/// let y = ctx.read_f32(out)?;
/// # Ok(()) }
/// ```
pub struct Scheduler {
    set: BackendSet,
    budgets: Budgets,
    params: SchedulerParams,
    cur_copy: usize,
    pins: Pins,
    run: RunTables,
    allocator: GraphAllocator,
    events: Vec<Option<EventId>>,
    eval_callback: Option<EvalCallback>,
    abort_callback: Option<AbortCallback>,
    /// The profiler installed on the scheduler and its backends.
    profile: Option<SchedProfile>,
    state: State,
    /// The graph the tables in `run` were made for.
    placed: PlacedGraph,
    /// Which pipeline copy's memory copy 0 now sits in.
    rotation: PipelineRotation,
    /// Graphs placed from scratch so far.
    placements: u64,
    /// The current placement's graph plans, one per split.
    plans: SplitPlans,
    /// The ids and chosen experts of expert-only copies ([`super::expert_copy`]).
    expert_scratch: ExpertScratch,
}

impl Scheduler {
    /// A scheduler over `backends` (priority order; the last must be a CPU).
    pub fn new(backends: &[Arc<dyn Backend>], params: SchedulerParams) -> Result<Self> {
        let set = BackendSet::new(backends, &params.buffer_types)?;
        if !(1..=MAX_COPIES).contains(&params.n_copies) {
            return Err(Error::Scheduler(format!("n_copies must be 1 to {MAX_COPIES}, not {}", params.n_copies)));
        }
        if params.max_split_inputs < MAX_SRC {
            return Err(Error::Scheduler(format!(
                "max_split_inputs must be at least {MAX_SRC} (one node's sources), not {}",
                params.max_split_inputs
            )));
        }
        let allocator = GraphAllocator::new(set.unique_bufts());
        let budgets = Budgets::new(&set, &params.budgets)?;
        let mut sched = Self {
            budgets,
            set,
            params,
            cur_copy: 0,
            pins: Pins::new(),
            run: RunTables::default(),
            allocator,
            events: Vec::new(),
            eval_callback: None,
            abort_callback: None,
            profile: None,
            state: State::Reset,
            placed: PlacedGraph::default(),
            rotation: PipelineRotation::default(),
            placements: 0,
            plans: SplitPlans::default(),
            expert_scratch: ExpertScratch::default(),
        };
        sched.make_events()?;
        Ok(sched)
    }

    fn make_events(&mut self) -> Result<()> {
        self.free_events();
        if self.params.n_copies > 1 {
            for b in self.set.indices() {
                let device = self.set.backend(b).device();
                for _ in 0..self.params.n_copies {
                    self.events.push(if device.caps().events { Some(device.event_new()?) } else { None });
                }
            }
        }
        Ok(())
    }

    fn free_events(&mut self) {
        let n = self.params.n_copies.max(1);
        for (i, ev) in self.events.drain(..).enumerate() {
            if let Some(ev) = ev {
                let _ = self.set.backend(BackendIndex::new(i / n)).device().event_free(ev);
            }
        }
    }

    fn split_params(&self) -> SplitParams {
        SplitParams {
            n_copies: self.params.n_copies,
            cur_copy: self.cur_copy,
            max_inputs: self.params.max_split_inputs,
        }
    }

    /// Places `graph` (gather, assign, expand, split) into the allocator's
    /// table and the run tables.
    fn place(&mut self, ctx: &mut Context, graph: Graph<'_>) -> Result<()> {
        let inputs = PlacementInputs {
            set: &self.set,
            pins: &self.pins,
            op_offload: self.params.op_offload,
            split: self.split_params(),
            graph_optimize: self.params.graph_optimize,
        };
        place_graph(ctx, graph, inputs, self.allocator.table_mut(), &mut self.run)
    }

    /// Sizes every backend's compute memory for `measure_graph` (the largest
    /// graph to come) and allocates it; returns what each backend's device
    /// holds (compute memory, everything else, the budget). Later graphs
    /// that fit never re-allocate. When a device's budget would be passed,
    /// [`Error::BudgetExceeded`] names it and nothing is allocated.
    pub fn reserve(&mut self, ctx: &mut Context, measure_graph: Graph<'_>) -> Result<MemoryReport> {
        let _span = tracing::debug_span!("reserve", nodes = measure_graph.n_nodes()).entered();
        self.synchronize()?;
        self.discard_placement(ctx);
        let reserved = self
            .place(ctx, measure_graph)
            .and_then(|()| reserve_placed(ctx, &mut self.allocator, &self.set, &self.budgets));
        self.discard_placement(ctx);
        reserved?;
        Ok(self.memory_report(ctx))
    }

    /// What each backend's device holds now: the compute memory, everything
    /// else in `ctx` on the device, the budget.
    pub fn memory_report(&self, ctx: &Context) -> MemoryReport {
        let sizes: Vec<usize> =
            (0..self.set.unique_bufts().len()).map(|i| self.allocator.buffer_size(BufferTypeIndex::new(i))).collect();
        memory_report(ctx, &self.set, &self.budgets, &sizes, self.allocator.own_buffers())
    }

    /// Sets (or, with `None`, removes) the memory budget of `backend`'s
    /// device, in bytes; it applies from the next reserve or allocation.
    pub fn set_budget(&mut self, backend: &Arc<dyn Backend>, bytes: Option<usize>) -> Result<()> {
        let b = self.index_of(backend)?;
        self.budgets.set(b, bytes);
        Ok(())
    }

    /// The memory budget of `backend`'s device.
    pub fn budget(&self, backend: &Arc<dyn Backend>) -> Result<Option<usize>> {
        Ok(self.budgets.of(self.index_of(backend)?))
    }

    /// Bytes of compute memory per backend, in priority order.
    pub fn buffer_sizes(&self) -> Vec<usize> {
        self.set.indices().map(|b| self.allocator.buffer_size(self.set.alloc_buft(b))).collect()
    }

    /// Compute memory of one backend.
    pub fn buffer_size(&self, backend: &Arc<dyn Backend>) -> Result<usize> {
        let b = self.index_of(backend)?;
        Ok(self.allocator.buffer_size(self.set.alloc_buft(b)))
    }

    fn index_of(&self, backend: &Arc<dyn Backend>) -> Result<BackendIndex> {
        self.set
            .index_of(backend)
            .ok_or_else(|| Error::Scheduler(format!("backend {} is not one of this scheduler's", backend.name())))
    }

    /// Places, splits and allocates `graph`: every node gets a backend, every
    /// tensor memory. Re-plans memory only when a node moved to another
    /// buffer type or the plan no longer fits (after synchronizing).
    ///
    /// The graph placed last time, in a context where nothing was changed
    /// since ([`Context::revision`]), keeps its placement, splits and memory:
    /// only the pipeline copies rotate.
    pub fn alloc_graph(&mut self, ctx: &mut Context, graph: Graph<'_>) -> Result<()> {
        let _span = tracing::trace_span!("alloc_graph", nodes = graph.n_nodes()).entered();
        self.reset(ctx);
        let result = if self.placed.holds_for(ctx, graph) {
            self.rotate_pipeline_copies(ctx)
        } else {
            self.place_and_alloc(ctx, graph)
        };
        if let Err(e) = result {
            self.discard_placement(ctx);
            return Err(e);
        }
        self.state = State::Allocated;
        // Between calls the user's graph reads its own sources again.
        self.run.split.unapply(ctx);
        self.placed.stamp(ctx);
        Ok(())
    }

    /// Places `graph` from scratch (assign, expand, split) and runs the
    /// alloc system over it.
    fn place_and_alloc(&mut self, ctx: &mut Context, graph: Graph<'_>) -> Result<()> {
        self.discard_placement(ctx);
        self.placed.record(graph);
        self.placements += 1;
        tracing::debug_span!("place", nodes = graph.n_nodes()).in_scope(|| self.place(ctx, graph))?;
        tracing::debug_span!("alloc", splits = self.run.split.splits.len())
            .in_scope(|| alloc_placed(ctx, &mut self.allocator, &self.set, &self.budgets))?;
        // Binding put every tensor at its planned place, pipeline copies included.
        self.rotation.bound();
        self.rotate_pipeline_copies(ctx)?;
        if self.params.debug > 0 {
            let placed = (&self.run.assigned, self.allocator.table());
            let text = describe_splits(ctx, graph, &self.set, &self.run.split, placed, self.params.debug);
            // Through the program's subscriber when it has one (the CLI's
            // shows `gantry::sched` at info when GANTRY_SCHED_DEBUG is set),
            // else straight to stderr as before.
            if tracing::dispatcher::has_been_set() {
                tracing::info!(target: "gantry::sched", "placement of {} nodes:\n{text}", graph.n_nodes());
            } else {
                eprint!("{text}");
            }
        }
        Ok(())
    }

    /// Removes the current placement's copies from `ctx` and forgets it.
    fn discard_placement(&mut self, ctx: &mut Context) {
        self.plans.release(&self.set);
        self.run.split.undo(ctx);
        self.placed.forget();
        self.rotation.bound();
        self.state = State::Reset;
    }

    /// Moves the pipeline copies' memory to this run's copy (see
    /// [`PipelineRotation`]).
    fn rotate_pipeline_copies(&mut self, ctx: &mut Context) -> Result<()> {
        let inputs = RotationInputs {
            set: &self.set,
            assigned: &self.run.assigned,
            table: self.allocator.table(),
            copies: &self.run.copies,
            tables: &self.run.split,
            n_copies: self.params.n_copies,
        };
        self.rotation.rotate(ctx, inputs, self.cur_copy)
    }

    /// Allocates `graph` if needed and computes it on every backend, waiting
    /// for the result.
    pub fn graph_compute(&mut self, ctx: &mut Context, graph: Graph<'_>) -> Result<()> {
        self.graph_compute_async(ctx, graph)?;
        self.synchronize()
    }

    /// Allocates `graph` if needed and starts computing it; results are
    /// ready after [`Scheduler::synchronize`].
    pub fn graph_compute_async(&mut self, ctx: &mut Context, graph: Graph<'_>) -> Result<()> {
        // A graph just allocated is computed as placed (its inputs were written
        // into that placement). A graph computed before is reused as is, except
        // with pipeline copies: then every run re-splits so that sources read
        // this run's copies.
        let reuse = match self.state {
            // Computed as placed, even if the user touched the context since
            // (writing inputs was what the placement was for).
            State::Allocated => self.placed.is_same_graph(graph),
            State::Computed => self.params.n_copies == 1 && self.placed.holds_for(ctx, graph),
            State::Reset => false,
        };
        if !reuse {
            self.alloc_graph(ctx, graph)?;
        }
        self.state = State::Computed;
        let _span = tracing::debug_span!("compute", splits = self.run.split.splits.len()).entered();
        self.run.split.apply(ctx);
        let inputs = ComputeInputs {
            set: &self.set,
            assigned: &self.run.assigned,
            table: self.allocator.table(),
            tables: &self.run.split,
            cur_copy: self.cur_copy,
            n_copies: self.params.n_copies,
            events: &self.events,
            abort: self.abort_callback.as_ref(),
            profile: self.profile.as_ref(),
        };
        let result =
            compute_splits(ctx, &inputs, &mut self.plans, &mut self.expert_scratch, self.eval_callback.as_mut());
        // Backends have taken what they need from the graph: restore the user's sources.
        self.run.split.unapply(ctx);
        self.cur_copy = next_copy(self.cur_copy, self.params.n_copies);
        result
    }

    /// Whether the compute started last ([`Scheduler::graph_compute_async`])
    /// has finished on every backend, answered without waiting for it: a
    /// frame loop starts a compute, polls this once per frame, and reads the
    /// outputs once it is `true` (then [`Scheduler::synchronize`] returns at
    /// once). An `Err` is a failure of the work or the device, named.
    ///
    /// Backends answer without waiting when they compute asynchronously
    /// (wgpu, CUDA); a CPU backend's compute has finished by the time
    /// `graph_compute_async` returns.
    ///
    /// ```no_run
    /// # use gantry_engine::{Context, Graph, Result, sched::Scheduler};
    /// # fn frame(sched: &mut Scheduler, ctx: &mut Context, graph: Graph<'_>, draw: impl Fn()) -> Result<()> {
    /// sched.graph_compute_async(ctx, graph)?; // returns once the work is submitted
    /// while !sched.is_done()? {
    ///     draw(); // the frame's own work
    /// }
    /// sched.synchronize()?; // at once: everything has finished
    /// # Ok(()) }
    /// ```
    pub fn is_done(&self) -> Result<bool> {
        for b in self.set.backends() {
            if !b.is_done()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Installs (or removes) a callback polled before each split of every
    /// compute: when it returns `true` the compute stops there with
    /// [`Error::Aborted`], on whichever backends the graph runs (work a GPU
    /// was already given runs to its end). The scheduler stays usable: the
    /// next compute runs the whole graph again. A CPU backend's own abort
    /// callback (`CpuBackend::set_abort_callback`) also stops between nodes.
    ///
    /// A frame loop raises a flag when it no longer needs the result:
    ///
    /// ```no_run
    /// # use std::sync::{Arc, atomic::{AtomicBool, Ordering}};
    /// # fn demo(sched: &mut gantry_engine::sched::Scheduler) {
    /// let stop = Arc::new(AtomicBool::new(false));
    /// let flag = stop.clone();
    /// sched.set_abort_callback(Some(Arc::new(move || flag.load(Ordering::Relaxed))));
    /// # }
    /// ```
    pub fn set_abort_callback(&mut self, callback: Option<AbortCallback>) {
        self.abort_callback = callback;
    }

    /// Installs (or removes, with `None`) a profiler: from the next compute
    /// on, each split, input copy and event wait is recorded on its
    /// backend's process track, and each backend is given the profiler to
    /// time its own nodes ([`Backend::set_profiler`]: the CPU backend does,
    /// per node and per worker task; others are timed per split). While a
    /// profiler is installed the scheduler waits for each split to finish
    /// before the next one starts, so a split's slice covers its work:
    /// pipelining across backends is off. See [`crate::profile`].
    pub fn set_profiler(&mut self, profiler: Option<Arc<Profiler>>) {
        SchedProfile::uninstall(&self.set);
        self.profile = profiler.map(|p| SchedProfile::install(p, &self.set));
    }

    /// Waits for every backend.
    pub fn synchronize(&mut self) -> Result<()> {
        for b in self.set.backends() {
            b.synchronize()?;
        }
        if self.state == State::Reset {
            // Between graphs, always start from copy 0 so steady generation
            // keeps using the same memory.
            self.cur_copy = 0;
        }
        Ok(())
    }

    /// Ends the current placement: sources read their originals again, and
    /// the graph must be allocated before it is computed again. The copies
    /// stay in `ctx` so that allocating the same graph again (with nothing
    /// changed in `ctx` since) reuses them; allocating another graph, or
    /// [`Scheduler::release`], removes them. Pins stay.
    pub fn reset(&mut self, ctx: &mut Context) {
        self.run.split.unapply(ctx);
        self.state = State::Reset;
    }

    /// Undoes the current placement and frees the scheduler's compute
    /// buffers in `ctx`. They live in the context, so a scheduler that is no
    /// longer needed should be released (or its context dropped) to give the
    /// memory back; tensors it placed become unallocated.
    pub fn release(&mut self, ctx: &mut Context) -> Result<()> {
        self.synchronize()?;
        self.discard_placement(ctx);
        self.allocator.release(ctx);
        Ok(())
    }

    /// Pins `t` to `backend` for every later run (until [`Scheduler::clear_pins`]).
    pub fn set_tensor_backend(&mut self, t: TensorId, backend: &Arc<dyn Backend>) -> Result<()> {
        let b = self.index_of(backend)?;
        self.pins.insert(t, b);
        // The next compute must place the graph again.
        self.placed.forget();
        Ok(())
    }

    /// The backend `t` is pinned to, or was assigned in the current run.
    pub fn tensor_backend(&self, t: TensorId) -> Option<&Arc<dyn Backend>> {
        let b = self.pins.get(t).copied().or_else(|| {
            (self.state != State::Reset).then(|| self.run.assigned.of(self.allocator.table(), t)).flatten()
        })?;
        Some(self.set.backend(b))
    }

    /// Removes every pin.
    pub fn clear_pins(&mut self) {
        self.pins.clear();
        self.placed.forget();
    }

    /// Installs (or removes) the eval callback (see [`EvalCallback`]).
    pub fn set_eval_callback(&mut self, callback: Option<EvalCallback>) {
        self.eval_callback = callback;
    }

    /// Changes the number of pipeline copies (1 to 8); the next compute re-plans.
    pub fn set_n_copies(&mut self, ctx: &mut Context, n_copies: usize) -> Result<()> {
        if !(1..=MAX_COPIES).contains(&n_copies) {
            return Err(Error::Scheduler(format!("n_copies must be 1 to {MAX_COPIES}, not {n_copies}")));
        }
        self.synchronize()?;
        self.discard_placement(ctx);
        self.free_events();
        self.params.n_copies = n_copies;
        self.cur_copy = 0;
        self.make_events()
    }

    /// Splits of the current run.
    pub fn splits(&self) -> &[Split] {
        &self.run.split.splits
    }

    /// Number of splits of the current run.
    pub fn n_splits(&self) -> usize {
        self.run.split.splits.len()
    }

    /// Split `i`'s nodes in the order they run (the optimize system may have
    /// moved nodes within the split; `graph.nodes()[split.nodes]` holds the
    /// same nodes in the graph's order).
    pub fn split_nodes(&self, i: usize) -> &[TensorId] {
        self.run.split.optimized.split_nodes(&self.run.split, i)
    }

    /// Split `i`'s fused groups (positions in [`Scheduler::split_nodes`]).
    pub fn split_fused(&self, i: usize) -> &[FusedGroup] {
        self.run.split.optimized.split_fused(i)
    }

    /// The tensors copied into split `i` before it runs.
    pub fn split_inputs(&self, i: usize) -> &[TensorId] {
        self.run.split.splits.get(i).map_or(&[], |s| &self.run.split.inputs[s.inputs.clone()])
    }

    /// How many times memory was planned so far (a graph computed again with
    /// the same shapes and placement does not add to it).
    pub fn plans_computed(&self) -> u64 {
        self.allocator.plans_computed()
    }

    /// How many times a graph was placed from scratch (assign, expand,
    /// split): the same graph allocated again in a context nothing changed
    /// since keeps its placement and does not add to it.
    pub fn placements_computed(&self) -> u64 {
        self.placements
    }

    /// Graph plans the current placement's splits run from (made at a
    /// placement's second compute, where the backend has plans).
    pub fn graph_plans_live(&self) -> usize {
        self.plans.live()
    }

    /// Pipeline copies.
    pub fn n_copies(&self) -> usize {
        self.params.n_copies
    }

    /// Backends in priority order.
    pub fn backends(&self) -> &[Arc<dyn Backend>] {
        self.set.backends()
    }

    /// The splits in words (`level` 1) and every node with its backend and the
    /// system step that chose it (`level` 2): what `GANTRY_SCHED_DEBUG` prints.
    pub fn describe(&self, ctx: &Context, graph: Graph<'_>, level: u8) -> String {
        describe_splits(ctx, graph, &self.set, &self.run.split, (&self.run.assigned, self.allocator.table()), level)
    }

    /// The current run as Graphviz `dot`, nodes coloured by backend, splits
    /// as clusters, copies as dashed red edges.
    pub fn to_dot(&self, ctx: &Context, graph: Graph<'_>) -> String {
        to_dot(ctx, graph, &self.set, &self.run.split, (&self.run.assigned, self.allocator.table()))
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.plans.release(&self.set);
        self.free_events();
        if self.profile.take().is_some() {
            SchedProfile::uninstall(&self.set);
        }
    }
}
