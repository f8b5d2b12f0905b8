//! The CPU backend: computes graphs node by node on a rayon pool, its own
//! or the host's, or on the host's job system.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use gantry_engine::profile::BackendProfiler;
use gantry_engine::sched::SplitRewrite;
use gantry_engine::{
    AbortCallback, Backend, BackendErrorKind, ComputeStatus, Context, Device, Error, EventId, Graph, GraphPlan,
    PlanTable, Result, TensorId,
};
use rayon::ThreadPool;

use super::CpuDevice;
use super::abort::{AbortSlot, Stop, run_nodes};
use super::compute_state::{KernelMemory, SharedComputeState};
use super::fused;
use super::jobs::{JobSystem, StoppingJobs};
use super::ops;
use super::optimize;
use super::parallel::Par;
use super::plan::CpuPlan;
use super::profiled::{ProfilerSlot, timed_group, timed_node};

/// A CPU execution stream (ggml's CPU backend). Computing is synchronous;
/// concurrent computes on one backend run one after the other.
///
/// Its threads are a rayon pool it builds ([`CpuBackend::with_threads`]),
/// the host's rayon pool ([`CpuBackend::with_pool`]) or the host's job
/// system ([`CpuBackend::with_job_system`]); on the host's it starts no
/// thread of its own.
pub struct CpuBackend {
    device: CpuDevice,
    state: SharedComputeState<Arc<dyn JobSystem>>,
    abort: AbortSlot,
    profiler: ProfilerSlot,
    plans: PlanTable<CpuPlan>,
}

impl CpuBackend {
    /// A backend on a new CPU device, with one thread per available core.
    pub fn new() -> Result<Self> {
        Self::with_threads(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// A backend on a new CPU device with `n_threads` threads.
    pub fn with_threads(n_threads: usize) -> Result<Self> {
        Self::with_device(CpuDevice::new(), n_threads)
    }

    /// A backend on `device` with `n_threads` threads. Fails, among other
    /// reasons, when `GANTRY_CPU_ISA` names no kernel path
    /// ([`isa_cap`](super::isa_cap)).
    pub fn with_device(device: CpuDevice, n_threads: usize) -> Result<Self> {
        super::isa_cap().map_err(|reason| Error::backend("CPU", BackendErrorKind::Unsupported, reason))?;
        Ok(Self {
            device,
            state: SharedComputeState::new(n_threads)?,
            abort: AbortSlot::default(),
            profiler: ProfilerSlot::default(),
            plans: PlanTable::new(),
        })
    }

    /// A backend on `device` that computes on the host's rayon `pool` and
    /// starts no threads of its own: kernels split their work over the
    /// pool's threads (a graph of several nodes runs on one of them, the
    /// caller waiting). The host may use the pool for its own work
    /// meanwhile; computes and host jobs share its threads.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gantry_cpu::{CpuBackend, CpuDevice};
    /// let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap());
    /// let backend = CpuBackend::with_pool(CpuDevice::new(), pool.clone());
    /// assert_eq!(backend.n_threads(), 2);
    /// assert!(backend.set_n_threads(4).is_err()); // the host sizes its own pool
    /// ```
    pub fn with_pool(device: CpuDevice, pool: Arc<ThreadPool>) -> Self {
        Self::with_job_system(device, pool)
    }

    /// A backend whose kernels run as tasks of the host's job system
    /// ([`JobSystem::run`]): it starts no thread of its own, and its thread
    /// count is the job system's [`JobSystem::concurrency`]. The graph's
    /// nodes run on the thread that calls compute; each kernel that splits
    /// its work hands the parts to `jobs` and waits for them.
    pub fn with_job_system(device: CpuDevice, jobs: Arc<dyn JobSystem>) -> Self {
        Self {
            device,
            state: SharedComputeState::with_pool(jobs),
            abort: AbortSlot::default(),
            profiler: ProfilerSlot::default(),
            plans: PlanTable::new(),
        }
    }

    /// The number of threads kernels split work over.
    pub fn n_threads(&self) -> usize {
        self.state.n_threads()
    }

    /// Sets the number of threads (a new pool; the scratch starts over). A
    /// backend on the host's pool answers `Err` for any other count.
    pub fn set_n_threads(&self, n_threads: usize) -> Result<()> {
        self.state.set_n_threads(n_threads)
    }

    /// Installs (or removes) a callback polled before each node; when it
    /// returns `true` the compute stops with [`ComputeStatus::Aborted`].
    /// It is called on the thread that runs the nodes: one of the backend's
    /// pool threads for a graph of several nodes on several threads.
    pub fn set_abort_callback(&self, callback: Option<AbortCallback>) {
        self.abort.set(callback);
    }

    /// Computes every node of `graph` in order. Views and leafs compute
    /// nothing; a node this backend cannot compute (unsupported op or dtype,
    /// unallocated or non-host memory, bad shapes) ends the compute with
    /// [`ComputeStatus::Failed`] naming the op and tensor.
    ///
    /// This is the entry point for code that reuses the CPU kernels over
    /// other host-addressable buffers.
    pub fn compute_graph(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        let stop = Stop::new(self.abort.current());
        let profiler = self.profiler.current();
        let profiler = profiler.as_ref();
        self.state.with(|state| {
            let (pool, n_threads, per_thread, mut memory) = state.parts();
            let jobs = StoppingJobs { inner: &**pool, stop: &stop };
            let par = Par::new(&jobs, n_threads, per_thread).with_stop(&stop);
            // A graph of several nodes runs on a pool thread, which then takes
            // part in every parallel kernel: a kernel splitting its work starts
            // at once and only wakes the other threads, instead of handing its
            // work over to the pool and sleeping until it is done (two thread
            // wake-ups per node, which the small mat-vecs of a small model cannot
            // afford). One node alone is handed over only if its kernel splits.
            if n_threads == 1 || graph.nodes().len() < 2 {
                return compute_nodes(ctx, graph, &par, &mut memory, &stop, profiler);
            }
            let mut status = ComputeStatus::Success;
            pool.enter(&mut || status = compute_nodes(ctx, graph, &par, &mut memory, &stop, profiler));
            status
        })
    }
}

impl CpuBackend {
    /// Computes plan `plan` (see [`Backend::graph_plan_compute`]): the
    /// planned steps on their planned thread counts, checked again first
    /// only when the context changed since.
    fn compute_plan(&self, ctx: &Context, plan: GraphPlan) -> ComputeStatus {
        let stop = Stop::new(self.abort.current());
        let profiler = self.profiler.current();
        let profiler = profiler.as_ref();
        let outcome = self.plans.with(self.name(), plan, |plan| {
            self.state.with(|state| {
                let (pool, n_threads, per_thread, mut memory) = state.parts();
                if let Err(e) = plan.refresh(ctx, n_threads) {
                    return ComputeStatus::Failed(e);
                }
                if let Err(e) = ops::grow_scratch(memory.shared, plan.work_floats()) {
                    return status_of(e);
                }
                let jobs = StoppingJobs { inner: &**pool, stop: &stop };
                let run = |memory: &mut KernelMemory<'_>| {
                    run_nodes(plan.steps(), &stop, |step| {
                        let par = Par::new(&jobs, step.threads, per_thread).with_stop(&stop);
                        match step.group {
                            Some((kind, ..)) => {
                                let members = plan.members(&step);
                                timed_group(profiler, ctx, members, kind.name(), &par, |par| {
                                    guarded(ctx, step.node, || fused::compute_group(ctx, kind, members, par, memory))
                                })
                            }
                            None => timed_node(profiler, ctx, step.node, &par, |par| {
                                guarded(ctx, step.node, || {
                                    let d = ctx.desc(step.node)?;
                                    ops::dispatch(ctx, step.node, d, par, memory)
                                })
                            }),
                        }
                    })
                };
                // As in `compute_graph`: several nodes run on a pool thread.
                if n_threads == 1 || plan.steps().len() < 2 {
                    return run(&mut memory);
                }
                let mut status = ComputeStatus::Success;
                pool.enter(&mut || status = run(&mut memory));
                status
            })
        });
        outcome.unwrap_or_else(ComputeStatus::Failed)
    }
}

/// The status of a failed node: a scratch allocation that failed is
/// `AllocFailed` (ggml's `GGML_STATUS_ALLOC_FAILED`), anything else `Failed`.
fn status_of(e: Error) -> ComputeStatus {
    match e {
        Error::OutOfMemory { .. } => ComputeStatus::AllocFailed,
        e => ComputeStatus::Failed(e),
    }
}

/// Runs one node's `kernel`, turning its error or panic into a status that
/// names the op and tensor.
fn guarded(ctx: &Context, node: TensorId, kernel: impl FnOnce() -> Result<()>) -> ComputeStatus {
    match catch_unwind(AssertUnwindSafe(kernel)) {
        Ok(Ok(())) => ComputeStatus::Success,
        Ok(Err(e)) => status_of(e),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let op = ctx.get(node).map_or("?", |d| d.op.name());
            let reason = format!("{op} kernel panicked on {}: {what}", ctx.describe(node));
            ComputeStatus::Failed(Error::backend("CPU", BackendErrorKind::Other, reason))
        }
    }
}

/// Computes the nodes of `graph` in order (see [`CpuBackend::compute_graph`]),
/// polling `stop` before each and after each ([`run_nodes`]).
fn compute_nodes(
    ctx: &Context,
    graph: Graph<'_>,
    par: &Par<'_>,
    memory: &mut KernelMemory<'_>,
    stop: &Stop,
    profiler: Option<&BackendProfiler>,
) -> ComputeStatus {
    let (nodes, fused) = (graph.nodes(), graph.fused());
    if fused.is_empty() {
        return run_nodes(nodes, stop, |node| {
            timed_node(profiler, ctx, node, par, |par| guarded(ctx, node, || ops::compute_node(ctx, node, par, memory)))
        });
    }
    // With fused groups: a group's first node runs the whole group (the
    // abort callback is polled before and after each step, as `run_nodes` does).
    let mut groups = fused.iter().peekable();
    let mut i = 0;
    while i < nodes.len() {
        if stop.poll() {
            return ComputeStatus::Aborted;
        }
        let node = nodes[i];
        while groups.next_if(|g| (g.start as usize) < i).is_some() {}
        let group = groups.next_if(|g| g.start as usize == i && g.range().end <= nodes.len());
        let status = match group {
            Some(g) => timed_group(profiler, ctx, &nodes[g.range()], g.kind.name(), par, |par| {
                guarded(ctx, node, || fused::compute_group(ctx, g.kind, &nodes[g.range()], par, memory))
            }),
            None => timed_node(profiler, ctx, node, par, |par| {
                guarded(ctx, node, || ops::compute_node(ctx, node, par, memory))
            }),
        };
        if !status.is_success() {
            return status;
        }
        if stop.raised() {
            return ComputeStatus::Aborted;
        }
        i = group.map_or(i + 1, |g| g.range().end);
    }
    ComputeStatus::Success
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend").field("n_threads", &self.n_threads()).finish()
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        "CPU"
    }

    fn device(&self) -> &dyn Device {
        &self.device
    }

    fn graph_compute(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        self.compute_graph(ctx, graph)
    }

    fn supports_graph_plans(&self) -> bool {
        true
    }

    fn graph_plan_create(&self, ctx: &Context, graph: Graph<'_>) -> Result<GraphPlan> {
        Ok(self.plans.insert(CpuPlan::new(ctx, graph, self.n_threads())?))
    }

    fn graph_plan_update(&self, ctx: &Context, plan: GraphPlan, graph: Graph<'_>) -> Result<()> {
        let n_threads = self.n_threads();
        self.plans.with(self.name(), plan, |p| p.update(ctx, graph, n_threads))?
    }

    fn graph_plan_compute(&self, ctx: &Context, plan: GraphPlan) -> ComputeStatus {
        self.compute_plan(ctx, plan)
    }

    fn graph_plan_free(&self, plan: GraphPlan) -> Result<()> {
        self.plans.remove(self.name(), plan).map(drop)
    }

    fn event_record(&self, event: EventId) -> Result<()> {
        // Everything submitted before this point has already run.
        self.device.events().record(event)
    }

    fn event_wait(&self, event: EventId) -> Result<()> {
        self.device.events().wait(event)
    }

    fn graph_optimize(&self, ctx: &Context, split: &mut SplitRewrite<'_>) -> Result<()> {
        optimize::optimize_split(ctx, split)
    }

    fn set_profiler(&self, profiler: Option<BackendProfiler>) -> bool {
        self.profiler.set(profiler);
        true
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_that_cannot_be_allocated_is_alloc_failed() {
        let mut shared = Vec::new();
        let err = ops::grow_scratch(&mut shared, usize::MAX / 8).unwrap_err();
        assert!(err.to_string().contains("CPU compute scratch"), "{err}");
        assert!(matches!(status_of(err), ComputeStatus::AllocFailed));
        assert!(matches!(status_of(Error::Aborted), ComputeStatus::Failed(_)));
        ops::grow_scratch(&mut shared, 16).unwrap();
        assert_eq!(shared.len(), 16);
    }
}
