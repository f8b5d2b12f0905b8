//! The CPU backend's side of a profile ([`gantry_engine::profile`]): where
//! the installed profiler is kept, a slice per node around its kernel, and a
//! slice per task of a node split over the threads (a job system wrapped
//! so every task it runs is timed on the thread that ran it). Without a
//! profiler a node runs exactly as before.

use std::sync::Mutex;

use gantry_engine::profile::{BackendProfiler, SliceKind, node_cost};
use gantry_engine::{ComputeStatus, Context, Name, TensorId};
use rayon::ThreadPool;

use super::jobs::JobSystem;
use super::parallel::Par;

/// Where a backend keeps its profiler (read once per compute).
#[derive(Default)]
pub struct ProfilerSlot(Mutex<Option<BackendProfiler>>);

impl ProfilerSlot {
    /// Installs (or removes) the profiler.
    pub fn set(&self, profiler: Option<BackendProfiler>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = profiler;
    }

    /// The profiler installed now.
    pub fn current(&self) -> Option<BackendProfiler> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A job system whose tasks are each recorded as a [`SliceKind::Task`] of
/// one node.
struct ProbedJobs<'a> {
    inner: &'a dyn JobSystem,
    profiler: &'a BackendProfiler,
    op: &'static str,
    name: Name,
}

impl JobSystem for ProbedJobs<'_> {
    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        let p = self.profiler;
        self.inner.run(n_tasks, &|i| {
            let t0 = p.profiler.now_ns();
            task(i);
            p.profiler.record_since(SliceKind::Task, p.process, self.op, self.name, i as u32, t0, 0, 0);
        })
    }

    fn enter(&self, f: &mut (dyn FnMut() + Send)) {
        self.inner.enter(f)
    }

    fn rayon_pool(&self) -> Option<&ThreadPool> {
        self.inner.rayon_pool()
    }

    fn stopped(&self) -> bool {
        self.inner.stopped()
    }
}

/// Runs `kernel` for `node` with `par`; with a profiler, times it as a
/// [`SliceKind::Node`] (with its bytes and flops) and each task it splits
/// off as a [`SliceKind::Task`].
pub fn timed_node(
    profiler: Option<&BackendProfiler>,
    ctx: &Context,
    node: TensorId,
    par: &Par<'_>,
    kernel: impl FnOnce(&Par<'_>) -> ComputeStatus,
) -> ComputeStatus {
    let (Some(p), Some(d)) = (profiler, profiler.and_then(|_| ctx.get(node))) else { return kernel(par) };
    let op = d.op.name();
    let jobs = ProbedJobs { inner: par.jobs(), profiler: p, op, name: d.name };
    let t0 = p.profiler.now_ns();
    let status = kernel(&par.with_jobs(&jobs));
    let (bytes, flops) = node_cost(ctx, d);
    p.profiler.record_since(SliceKind::Node, p.process, op, d.name, 0, t0, bytes, flops);
    status
}

/// [`timed_node`] for a fused group: one slice named after the group's
/// kind (`op`), with the bytes and flops of all its nodes.
pub fn timed_group(
    profiler: Option<&BackendProfiler>,
    ctx: &Context,
    members: &[TensorId],
    op: &'static str,
    par: &Par<'_>,
    kernel: impl FnOnce(&Par<'_>) -> ComputeStatus,
) -> ComputeStatus {
    let (Some(p), Some(d)) = (profiler, profiler.and(members.first()).and_then(|&m| ctx.get(m))) else {
        return kernel(par);
    };
    let jobs = ProbedJobs { inner: par.jobs(), profiler: p, op, name: d.name };
    let t0 = p.profiler.now_ns();
    let status = kernel(&par.with_jobs(&jobs));
    let (bytes, flops) = members
        .iter()
        .filter_map(|&m| ctx.get(m))
        .map(|d| node_cost(ctx, d))
        .fold((0, 0), |(b, f), (nb, nf)| (b + nb, f + nf));
    p.profiler.record_since(SliceKind::Node, p.process, op, d.name, 0, t0, bytes, flops);
    status
}
