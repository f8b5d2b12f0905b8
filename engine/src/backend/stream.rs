//! Backends: execution streams on a device (the `Backend` trait).

use std::any::Any;

use gantry_arenas::{EventId, TensorId};

use crate::profile::BackendProfiler;
use crate::sched::optimize::SplitRewrite;
use crate::{Context, Device, Error, Graph, GraphPlan, Result};

/// How a graph computation ended (ggml's `ggml_status`).
#[derive(Debug)]
pub enum ComputeStatus {
    /// Every node was computed.
    Success,
    /// The abort callback asked to stop; later nodes were not computed.
    Aborted,
    /// Scratch memory could not be allocated.
    AllocFailed,
    /// A node failed.
    Failed(Error),
}

impl ComputeStatus {
    /// `Ok` on success, the matching `Err` otherwise.
    pub fn into_result(self) -> Result<()> {
        match self {
            ComputeStatus::Success => Ok(()),
            ComputeStatus::Aborted => Err(Error::Aborted),
            ComputeStatus::AllocFailed => Err(Error::OutOfMemory { buffer_type: "compute scratch".into(), size: 0 }),
            ComputeStatus::Failed(e) => Err(e),
        }
    }

    /// Whether the status is `Success`.
    pub fn is_success(&self) -> bool {
        matches!(self, ComputeStatus::Success)
    }
}

/// An execution stream on a device (ggml's `ggml_backend`).
///
/// Work submitted with the `_async` methods runs in submission order and is
/// finished by [`Backend::synchronize`]. Backends without asynchronous
/// execution keep the default methods, which run synchronously.
pub trait Backend: Send + Sync + 'static {
    /// The backend's name (usually its device's).
    fn name(&self) -> &str;

    /// The device this backend runs on.
    fn device(&self) -> &dyn Device;

    /// Computes every node of `graph`, in order, and waits for the result.
    fn graph_compute(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus;

    /// Starts computing `graph`; the result is ready after [`Backend::synchronize`].
    fn graph_compute_async(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        self.graph_compute(ctx, graph)
    }

    /// Whether this backend makes graph plans ([`Backend::graph_plan_create`]).
    /// The scheduler runs a split whose graph did not change from a plan
    /// where the backend has them, and with `graph_compute_async` elsewhere.
    fn supports_graph_plans(&self) -> bool {
        false
    }

    /// Makes a plan for `graph`: everything about computing it that does
    /// not depend on tensor data, done once (see [`crate::PlanTable`]).
    /// `graph` must be allocated; a node the backend cannot compute is an
    /// `Err` naming it, as `graph_compute` would report it.
    fn graph_plan_create(&self, ctx: &Context, graph: Graph<'_>) -> Result<GraphPlan> {
        let _ = (ctx, graph);
        Err(Error::Unsupported(format!("backend {} has no graph plans", self.name())))
    }

    /// Points `plan` at `graph` (the same graph with new tensors or
    /// placements, or another one), reusing what it can: memory, compiled
    /// kernels, recorded work that still fits.
    fn graph_plan_update(&self, ctx: &Context, plan: GraphPlan, graph: Graph<'_>) -> Result<()> {
        let _ = (ctx, plan, graph);
        Err(Error::Unsupported(format!("backend {} has no graph plans", self.name())))
    }

    /// Computes `plan`'s graph and waits for the result. A context changed
    /// since the plan was made or updated ([`Context::revision`]) is
    /// checked again first, so a plan never computes with stale placements.
    fn graph_plan_compute(&self, ctx: &Context, plan: GraphPlan) -> ComputeStatus {
        let _ = (ctx, plan);
        ComputeStatus::Failed(Error::Unsupported(format!("backend {} has no graph plans", self.name())))
    }

    /// Starts computing `plan`'s graph; the result is ready after
    /// [`Backend::synchronize`].
    fn graph_plan_compute_async(&self, ctx: &Context, plan: GraphPlan) -> ComputeStatus {
        self.graph_plan_compute(ctx, plan)
    }

    /// Frees `plan`; its handle is stale afterwards.
    fn graph_plan_free(&self, plan: GraphPlan) -> Result<()> {
        let _ = plan;
        Err(Error::Unsupported(format!("backend {} has no graph plans", self.name())))
    }

    /// Rewrites one of this backend's splits before its memory is planned
    /// (ggml's `graph_optimize`; the scheduler's optimize system,
    /// [`crate::sched::optimize`]): the backend may move nodes earlier so
    /// that nodes it computes together are adjacent, mark fused groups, and
    /// keep alive what a fused group still reads. The groups come back with
    /// the split's graph ([`Graph::fused`]). The default changes nothing.
    fn graph_optimize(&self, ctx: &Context, split: &mut SplitRewrite<'_>) -> Result<()> {
        let _ = (ctx, split);
        Ok(())
    }

    /// Waits for all submitted work.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Whether all submitted work has finished, answered without waiting
    /// for it (a frame loop polls this; [`Backend::synchronize`] then
    /// returns at once and reports any error of that work). An `Err` is a
    /// failure of the submitted work or of the device.
    ///
    /// The default waits ([`Backend::synchronize`]) and answers `true`:
    /// right for backends whose computes finish within the call, and only
    /// correct (not prompt) for others, which override it.
    fn is_done(&self) -> Result<bool> {
        self.synchronize().map(|()| true)
    }

    /// Queues a write of `data` into `tensor` at byte `offset`.
    fn set_tensor_async(&self, ctx: &Context, tensor: TensorId, offset: usize, data: &[u8]) -> Result<()> {
        ctx.write_tensor_bytes(tensor, offset, data)
    }

    /// Queues a read of `tensor` at byte `offset` into `out`; `out` is filled
    /// after [`Backend::synchronize`].
    fn get_tensor_async(&self, ctx: &Context, tensor: TensorId, offset: usize, out: &mut [u8]) -> Result<()> {
        ctx.read_tensor_bytes(tensor, offset, out)
    }

    /// Queues a copy of `src` (written by `src_backend`) into `dst` (in this
    /// backend's memory). Returns `Ok(false)` when this backend cannot copy
    /// asynchronously from there; the caller then synchronizes and copies.
    fn cpy_tensor_async(&self, src_backend: &dyn Backend, ctx: &Context, src: TensorId, dst: TensorId) -> Result<bool> {
        let _ = (src_backend, ctx, src, dst);
        Ok(false)
    }

    /// Records `event` at the current point of this stream.
    fn event_record(&self, event: EventId) -> Result<()>;

    /// Makes later work on this stream wait until `event` has completed.
    fn event_wait(&self, event: EventId) -> Result<()>;

    /// Installs (or removes, with `None`) a profiler that times this
    /// backend's own work: the CPU backend records a slice per node and per
    /// task of a node split over its threads. The default records nothing:
    /// the scheduler then times the backend's splits only (see
    /// [`crate::profile`]). Returns `true` when the backend times its nodes.
    fn set_profiler(&self, profiler: Option<BackendProfiler>) -> bool {
        let _ = profiler;
        false
    }

    /// For downcasting to the concrete type (extensions use this).
    fn as_any(&self) -> &dyn Any;
}
