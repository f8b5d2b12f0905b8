//! The scheduler: reserve, alloc and compute a graph across backends.

use std::sync::{Arc, LazyLock};

use gantry::Backend;
use gantry::engine::Limits;
use gantry::sched::{MAX_BACKENDS, MAX_COPIES, Scheduler, SchedulerParams};

use crate::backend::{GantryBackend, backend_of};
use crate::context::{CONTEXTS, GantryContext};
use crate::entry::{CallResult, Failure, entry};
use crate::graph::{GRAPHS, GantryGraph};
use crate::handles::{Table, lock};
use crate::ptr::{read_in, slice, slice_mut, write_out};
use crate::status::GantryStatus;

/// A scheduler: runs graphs across its backends (priority order, the CPU
/// last), placing, splitting and planning memory. It is bound to one
/// context: the first it reserves, allocates or computes in, where its
/// compute memory lives. Calls with another context fail with
/// `GANTRY_ERROR_STATE` (naming both) and change nothing; make one
/// scheduler per context.
///
/// A zero-initialized value (`{0}`) is the null handle.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GantryScheduler {
    /// The handle's number (0 = null). Opaque: only copy or compare it.
    pub id: u64,
}

/// How a scheduler is set up; zero fields take the defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct GantrySchedulerParams {
    /// Nodes a graph is expected to have, at most 65536 (0: 4096).
    pub graph_size: usize,
    /// Pipeline copies, 1 to 8 (0: 1).
    pub n_copies: usize,
}

/// A scheduler and the context it is bound to.
///
/// The engine's scheduler keeps its compute buffers and placement copies as
/// ids inside the context it worked in; the same ids in another context name
/// that context's own buffers (its weights), which a reserve or release there
/// would free or overwrite. So a scheduler is bound to the first context it
/// reserves, allocates or computes in, and every later call with another one
/// is refused before either context is touched.
pub(crate) struct SchedulerEntry {
    sched: Scheduler,
    /// The handle of the context it is bound to (`None` until its first use).
    bound: Option<u64>,
}

impl SchedulerEntry {
    /// Fails, naming both contexts, unless `ctx` is the context this
    /// scheduler is bound to or it is bound to none yet.
    fn check_bound(&self, sched: GantryScheduler, ctx: GantryContext) -> CallResult {
        match self.bound {
            Some(bound) if bound != ctx.id => Err(Failure::new(
                GantryStatus::GantryErrorState,
                format!(
                    "scheduler {:#x} is bound to context {bound:#x} (the first it reserved, allocated or computed \
                     in; its memory lives there), not context {:#x}: nothing was done in either; use one \
                     scheduler per context",
                    sched.id, ctx.id
                ),
            )),
            _ => Ok(()),
        }
    }
}

pub(crate) static SCHEDULERS: LazyLock<Table<SchedulerEntry>> = LazyLock::new(|| Table::new("scheduler", 0x5343));

/// A scheduler over the `n` backends (priority order, the last a CPU);
/// `params` may be null for the defaults.
///
/// Threading: any thread. Calls on one scheduler are serialized.
///
/// Binding: the new scheduler is bound to no context yet; the first it
/// reserves, allocates or computes in becomes its own.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `backends` is null or valid for `n` reads; `params` is null or valid for
/// one read; `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_scheduler_new(
    backends: *const GantryBackend,
    n: usize,
    params: *const GantrySchedulerParams,
    out: *mut GantryScheduler,
) -> GantryStatus {
    entry("gantry_scheduler_new", || {
        if n == 0 || n > MAX_BACKENDS {
            return Err(Failure::invalid(format!(
                "a scheduler takes 1 to {MAX_BACKENDS} backends (the CPU last), not {n}"
            )));
        }
        // SAFETY: the caller's contract.
        let handles = unsafe { slice(backends, n, "backends")? };
        let backends: Vec<Arc<dyn Backend>> = handles.iter().map(|&b| backend_of(b)).collect::<Result<_, _>>()?;
        let c = if params.is_null() {
            GantrySchedulerParams::default()
        } else {
            // SAFETY: the caller's contract (null or one readable value).
            unsafe { read_in(params, "params")? }
        };
        let mut p = SchedulerParams::default();
        if c.graph_size != 0 {
            // A hint for sizing tables: bounded like every count from outside.
            let max = Limits::DEFAULT.max_tensors;
            p.graph_size = Limits::DEFAULT
                .check_count("params->graph_size", c.graph_size as u64, max)
                .map_err(Failure::invalid)?;
        }
        if c.n_copies > MAX_COPIES {
            return Err(Failure::invalid(format!(
                "params->n_copies must be 1 to {MAX_COPIES} (0: 1), not {}",
                c.n_copies
            )));
        }
        if c.n_copies != 0 {
            p.n_copies = c.n_copies;
        }
        if out.is_null() {
            return Err(Failure::invalid("out is a null pointer"));
        }
        let sched = Scheduler::new(&backends, p)?;
        let id = SCHEDULERS.insert(SchedulerEntry { sched, bound: None });
        // SAFETY: the caller's contract.
        unsafe { write_out(out, GantryScheduler { id }, "out") }
    })
}

/// Frees a scheduler. Its compute memory stays in the context it is bound to
/// until that context is freed (call `gantry_scheduler_release` first to
/// give it back now).
///
/// Threading: any thread; waits for calls in flight on it.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_free(sched: GantryScheduler) -> GantryStatus {
    entry("gantry_scheduler_free", || SCHEDULERS.remove(sched.id).map(drop))
}

/// Runs `f` with the scheduler, context and graph behind the handles,
/// locked in that order (every call takes them in this order), once the
/// context is known to be the scheduler's own (binding it on first use)
/// and the graph to be the context's.
fn with_sched_graph(
    sched: GantryScheduler,
    ctx: GantryContext,
    graph: GantryGraph,
    f: impl FnOnce(&mut Scheduler, &mut gantry::Context, gantry::Graph<'_>) -> CallResult,
) -> CallResult {
    let s = SCHEDULERS.get(sched.id)?;
    let mut s = lock(&s, "scheduler")?;
    let c = CONTEXTS.get(ctx.id)?;
    s.check_bound(sched, ctx)?;
    let g = GRAPHS.get(graph.id)?;
    let g = lock(&g, "graph")?;
    g.check_context(ctx)?;
    let mut c = lock(&c, "context")?;
    // Bound before the engine runs: even a failed call may have left
    // buffers in this context.
    s.bound = Some(ctx.id);
    f(&mut s.sched, &mut c, g.graph())
}

/// Sets the memory budget of `backend`'s device for this scheduler: the
/// bytes everything on the device (weights, caches, compute memory) may
/// take; `bytes == 0` removes it. Checked from the next reserve or
/// allocation on, before any compute memory grows.
///
/// Threading: as the scheduler.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_set_budget(
    sched: GantryScheduler,
    backend: GantryBackend,
    bytes: usize,
) -> GantryStatus {
    entry("gantry_scheduler_set_budget", || {
        let backend = backend_of(backend)?;
        let s = SCHEDULERS.get(sched.id)?;
        let mut s = lock(&s, "scheduler")?;
        s.sched.set_budget(&backend, (bytes > 0).then_some(bytes))?;
        Ok(())
    })
}

/// Sizes and allocates every backend's compute memory for `graph` (the
/// largest graph to come) and writes the bytes per backend (priority order)
/// into `bytes` (room for `cap`; the count goes to `n_out` when not null).
/// When a backend's memory budget ([`gantry_scheduler_set_budget`]) would
/// be exceeded it returns `GANTRY_ERROR_OUT_OF_MEMORY`, naming the device,
/// and allocates nothing.
///
/// Threading: as the scheduler and context. Blocks while memory is allocated.
///
/// Binding: the scheduler is bound to the first context it reserves,
/// allocates or computes in (its memory lives there); another context is
/// `GANTRY_ERROR_STATE`, naming both, and nothing is done in either.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `bytes` is null or valid for `cap` writes; `n_out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_scheduler_reserve(
    sched: GantryScheduler,
    ctx: GantryContext,
    graph: GantryGraph,
    bytes: *mut usize,
    cap: usize,
    n_out: *mut usize,
) -> GantryStatus {
    entry("gantry_scheduler_reserve", || {
        with_sched_graph(sched, ctx, graph, |s, c, g| {
            let sizes = s.reserve(c, g)?.compute_bytes();
            if !n_out.is_null() {
                // SAFETY: the caller's contract.
                unsafe { write_out(n_out, sizes.len(), "n_out")? };
            }
            if bytes.is_null() && cap > 0 {
                return Err(Failure::invalid(format!("bytes is a null pointer (length {cap})")));
            }
            if cap < sizes.len() && !bytes.is_null() {
                return Err(Failure::new(
                    GantryStatus::GantryErrorBufferTooSmall,
                    format!("{} backends, room for {cap}", sizes.len()),
                ));
            }
            if !bytes.is_null() {
                // SAFETY: the caller's contract.
                unsafe { slice_mut(bytes, sizes.len(), "bytes")? }.copy_from_slice(&sizes);
            }
            Ok(())
        })
    })
}

/// Places, splits and allocates `graph`: after it, inputs can be written.
///
/// Threading: as the scheduler and context.
///
/// Binding: the scheduler is bound to the first context it reserves,
/// allocates or computes in (its memory lives there); another context is
/// `GANTRY_ERROR_STATE`, naming both, and nothing is done in either.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_alloc(
    sched: GantryScheduler,
    ctx: GantryContext,
    graph: GantryGraph,
) -> GantryStatus {
    entry("gantry_scheduler_alloc", || with_sched_graph(sched, ctx, graph, |s, c, g| Ok(s.alloc_graph(c, g)?)))
}

/// Computes `graph` on every backend (allocating it first if needed) and
/// waits for the result.
///
/// Threading: as the scheduler and context; the calling thread waits (the
/// CPU backend's threads do the work). An abort callback returning `true`
/// makes it return `GANTRY_ERROR_ABORTED`. Runs the backends' abort
/// callbacks and job systems' `run` (see there); calls they make into the
/// API on the thread running them return `GANTRY_ERROR_REENTRANT`, and
/// this call goes on.
///
/// Binding: the scheduler is bound to the first context it reserves,
/// allocates or computes in (its memory lives there); another context is
/// `GANTRY_ERROR_STATE`, naming both, and nothing is done in either.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_compute(
    sched: GantryScheduler,
    ctx: GantryContext,
    graph: GantryGraph,
) -> GantryStatus {
    entry("gantry_scheduler_compute", || with_sched_graph(sched, ctx, graph, |s, c, g| Ok(s.graph_compute(c, g)?)))
}

/// Starts computing `graph` (allocating it first if needed) and returns
/// once the work is submitted: on a GPU the caller's thread is free while
/// it runs (a frame loop polls `gantry_scheduler_is_done` once per frame).
/// Read the outputs after `gantry_scheduler_is_done` says `true` or after
/// `gantry_scheduler_wait`; until then, write nothing into `ctx`. A CPU
/// backend computes within this call (on its threads, or the host's job
/// system), so there it returns when the work is done.
///
/// Threading: as the scheduler and context. Runs callbacks as
/// `gantry_scheduler_compute` does.
///
/// Binding: the scheduler is bound to the first context it reserves,
/// allocates or computes in (its memory lives there); another context is
/// `GANTRY_ERROR_STATE`, naming both, and nothing is done in either.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_compute_async(
    sched: GantryScheduler,
    ctx: GantryContext,
    graph: GantryGraph,
) -> GantryStatus {
    entry("gantry_scheduler_compute_async", || {
        with_sched_graph(sched, ctx, graph, |s, c, g| Ok(s.graph_compute_async(c, g)?))
    })
}

/// Whether the compute started last has finished on every backend, into
/// `done`, answered without waiting. A failure of that work is this call's
/// error.
///
/// Threading: as the scheduler.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `done` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_scheduler_is_done(sched: GantryScheduler, done: *mut bool) -> GantryStatus {
    entry("gantry_scheduler_is_done", || {
        let s = SCHEDULERS.get(sched.id)?;
        let s = lock(&s, "scheduler")?;
        let is_done = s.sched.is_done()?;
        // SAFETY: the caller's contract.
        unsafe { write_out(done, is_done, "done") }
    })
}

/// Waits until the compute started last has finished on every backend.
///
/// Threading: as the scheduler; the calling thread waits.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_wait(sched: GantryScheduler) -> GantryStatus {
    entry("gantry_scheduler_wait", || {
        let s = SCHEDULERS.get(sched.id)?;
        let mut s = lock(&s, "scheduler")?;
        Ok(s.sched.synchronize()?)
    })
}

/// Gives the scheduler's compute memory in `ctx` back.
///
/// Threading: as the scheduler and context.
///
/// Binding: the scheduler is bound to the first context it reserves,
/// allocates or computes in (its memory lives there); another context is
/// `GANTRY_ERROR_STATE`, naming both, and nothing is done in either.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_release(sched: GantryScheduler, ctx: GantryContext) -> GantryStatus {
    entry("gantry_scheduler_release", || {
        let s = SCHEDULERS.get(sched.id)?;
        let mut s = lock(&s, "scheduler")?;
        let c = CONTEXTS.get(ctx.id)?;
        s.check_bound(sched, ctx)?;
        if s.bound.is_none() {
            // Never used: it has nothing in any context to give back.
            return Ok(());
        }
        let mut c = lock(&c, "context")?;
        Ok(s.sched.release(&mut c)?)
    })
}
