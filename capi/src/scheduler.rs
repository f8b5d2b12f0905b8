//! The scheduler: reserve, alloc and compute a graph across backends.

use std::sync::{Arc, LazyLock};

use gantry::Backend;
use gantry::sched::{Scheduler, SchedulerParams};

use crate::backend::{GantryBackend, backend_of};
use crate::context::{CONTEXTS, GantryContext};
use crate::entry::{CallResult, Failure, entry};
use crate::graph::{GRAPHS, GantryGraph};
use crate::handles::{Table, lock};
use crate::ptr::{slice, slice_mut, write_out};
use crate::status::GantryStatus;

/// A scheduler: runs graphs across its backends (priority order, the CPU
/// last), placing, splitting and planning memory.
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
    /// Nodes a graph is expected to have (0: 4096).
    pub graph_size: usize,
    /// Pipeline copies, 1 to 8 (0: 1).
    pub n_copies: usize,
}

pub(crate) static SCHEDULERS: LazyLock<Table<Scheduler>> = LazyLock::new(|| Table::new("scheduler"));

/// A scheduler over the `n` backends (priority order, the last a CPU);
/// `params` may be null for the defaults.
///
/// Threading: any thread. Calls on one scheduler are serialized.
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
        // SAFETY: the caller's contract.
        let handles = unsafe { slice(backends, n, "backends")? };
        if n == 0 {
            return Err(Failure::invalid("a scheduler needs at least one backend (the CPU last)"));
        }
        let backends: Vec<Arc<dyn Backend>> = handles.iter().map(|&b| backend_of(b)).collect::<Result<_, _>>()?;
        // SAFETY: the caller's contract (null or one readable value).
        let c = if params.is_null() { GantrySchedulerParams::default() } else { unsafe { params.read() } };
        let mut p = SchedulerParams::default();
        if c.graph_size != 0 {
            p.graph_size = c.graph_size;
        }
        if c.n_copies != 0 {
            p.n_copies = c.n_copies;
        }
        if out.is_null() {
            return Err(Failure::invalid("out is a null pointer"));
        }
        let sched = Scheduler::new(&backends, p)?;
        // SAFETY: the caller's contract.
        unsafe { write_out(out, GantryScheduler { id: SCHEDULERS.insert(sched) }, "out") }
    })
}

/// Frees a scheduler. Its compute memory stays in the context it last used
/// until `gantry_scheduler_release` or the context is freed.
///
/// Threading: any thread; waits for calls in flight on it.
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_free(sched: GantryScheduler) -> GantryStatus {
    entry("gantry_scheduler_free", || SCHEDULERS.remove(sched.id).map(drop))
}

/// Runs `f` with the scheduler, context and graph behind the handles,
/// locked in that order (every call takes them in this order).
fn with_sched_graph(
    sched: GantryScheduler,
    ctx: GantryContext,
    graph: GantryGraph,
    f: impl FnOnce(&mut Scheduler, &mut gantry::Context, gantry::Graph<'_>) -> CallResult,
) -> CallResult {
    let s = SCHEDULERS.get(sched.id)?;
    let mut s = lock(&s, "scheduler")?;
    let g = GRAPHS.get(graph.id)?;
    let g = lock(&g, "graph")?;
    g.check_context(ctx)?;
    let c = CONTEXTS.get(ctx.id)?;
    let mut c = lock(&c, "context")?;
    f(&mut s, &mut c, g.graph())
}

/// Sets the memory budget of `backend`'s device for this scheduler: the
/// bytes everything on the device (weights, caches, compute memory) may
/// take; `bytes == 0` removes it. Checked from the next reserve or
/// allocation on, before any compute memory grows.
///
/// Threading: as the scheduler.
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
        s.set_budget(&backend, (bytes > 0).then_some(bytes))?;
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
/// makes it return `GANTRY_ERROR_ABORTED`.
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
/// Threading: as the scheduler and context.
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
/// # Safety
/// `done` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_scheduler_is_done(sched: GantryScheduler, done: *mut bool) -> GantryStatus {
    entry("gantry_scheduler_is_done", || {
        let s = SCHEDULERS.get(sched.id)?;
        let s = lock(&s, "scheduler")?;
        let is_done = s.is_done()?;
        // SAFETY: the caller's contract.
        unsafe { write_out(done, is_done, "done") }
    })
}

/// Waits until the compute started last has finished on every backend.
///
/// Threading: as the scheduler; the calling thread waits.
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_wait(sched: GantryScheduler) -> GantryStatus {
    entry("gantry_scheduler_wait", || {
        let s = SCHEDULERS.get(sched.id)?;
        let mut s = lock(&s, "scheduler")?;
        Ok(s.synchronize()?)
    })
}

/// Gives the scheduler's compute memory in `ctx` back.
///
/// Threading: as the scheduler and context.
#[unsafe(no_mangle)]
pub extern "C" fn gantry_scheduler_release(sched: GantryScheduler, ctx: GantryContext) -> GantryStatus {
    entry("gantry_scheduler_release", || {
        let s = SCHEDULERS.get(sched.id)?;
        let mut s = lock(&s, "scheduler")?;
        let c = CONTEXTS.get(ctx.id)?;
        let mut c = lock(&c, "context")?;
        Ok(s.release(&mut c)?)
    })
}
