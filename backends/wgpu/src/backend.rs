//! The wgpu backend (a stream): computes a graph as one submission.

use std::any::Any;

use gantry_arenas::{EventId, TensorId};
use gantry_engine::{Backend, ComputeStatus, Context, Device, Error, Graph, GraphPlan, PlanTable, Result};

use super::buffer::WgpuBuffer;
use super::device::WgpuDevice;
use super::gpu::{GpuBuffer, Recorder, STORAGE_SLOTS};
use super::kernels::{self, Launch};
use super::plan::WgpuPlan;
use gantry_engine::device_state::BatchRecorder;

/// A stream on a [`WgpuDevice`]. `graph_compute` plans every node, records
/// all dispatches into one command encoder with their parameters in one
/// uniform buffer, submits once and waits; `graph_compute_async` does not
/// wait, and [`Backend::synchronize`] does (for Gantry's own submissions
/// only, on a queue shared with a host).
pub struct WgpuBackend {
    device: WgpuDevice,
    recorder: BatchRecorder<Recorder>,
    plans: PlanTable<WgpuPlan>,
}

impl WgpuBackend {
    pub(crate) fn new(device: WgpuDevice) -> Self {
        let recorder = BatchRecorder::new(Recorder::new(device.gpu()));
        Self { device, recorder, plans: PlanTable::new() }
    }

    fn unsupported(&self, ctx: &Context, node: TensorId, reason: &str) -> Error {
        let op = ctx.get(node).map_or("?", |d| d.op.name());
        Error::Unsupported(format!("{}: {op} {}: {reason}", self.device.name(), ctx.describe(node)))
    }

    /// The device buffer holding `t`, and `t`'s offset in it.
    fn locate<'c>(&self, ctx: &'c Context, t: TensorId) -> Result<(&'c GpuBuffer, usize)> {
        let (entry, placement) = ctx.tensor_buffer(t)?;
        let buffer = entry.buffer.as_any().downcast_ref::<WgpuBuffer>().ok_or_else(|| {
            Error::Unsupported(format!(
                "{}: tensor {} is in {} memory; a wgpu backend reads only its own buffers",
                self.device.name(),
                ctx.describe(t),
                entry.buffer_type.name()
            ))
        })?;
        if !std::sync::Arc::ptr_eq(buffer.mem().gpu(), self.device.gpu()) {
            return Err(Error::Unsupported(format!(
                "{}: tensor {} is on {}",
                self.device.name(),
                ctx.describe(t),
                buffer.mem().gpu().name
            )));
        }
        Ok((buffer.mem(), placement.offset))
    }

    fn record(&self, recorder: &mut Recorder, ctx: &Context, node: TensorId, launch: &Launch) -> Result<()> {
        let pipeline = self.device.kernels().pipeline(&launch.key)?;
        let mut params = launch.params;
        let mut buffers: [Option<&GpuBuffer>; STORAGE_SLOTS] = [None; STORAGE_SLOTS];
        for slot in 0..STORAGE_SLOTS {
            let Some(t) = launch.slots[slot] else { continue };
            let (buffer, offset) = self.locate(ctx, t)?;
            let unit = launch.key.stores[slot].unit();
            if !offset.is_multiple_of(unit) {
                return Err(self.unsupported(ctx, node, &format!("tensor offset {offset} is not {unit}-byte aligned")));
            }
            params.offs[slot] =
                u32::try_from(offset / unit).map_err(|_| self.unsupported(ctx, node, "offset does not fit 32 bits"))?;
            buffers[slot] = Some(buffer);
        }
        // Unused slots still need a buffer bound: repeat the destination's.
        let Some(dst) = buffers[0] else { return Err(self.unsupported(ctx, node, "no destination")) };
        let slots = buffers.map(|b| b.unwrap_or(dst));
        recorder.push(&pipeline, bytemuck::bytes_of(&params), slots, launch.groups)
    }

    /// Records every node of `nodes` into `recorder` (begun for them).
    fn record_nodes(&self, recorder: &mut Recorder, ctx: &Context, nodes: &[TensorId]) -> Result<()> {
        let caps = self.device.kernel_caps();
        for &node in nodes {
            match kernels::plan(ctx, node, caps) {
                Ok(Some(launch)) => self.record(recorder, ctx, node, &launch)?,
                Ok(None) => {}
                Err(reason) => return Err(self.unsupported(ctx, node, &reason)),
            }
        }
        Ok(())
    }

    /// Records `plan`'s nodes and writes their parameters once.
    fn record_plan(&self, ctx: &Context, plan: &mut WgpuPlan) -> Result<()> {
        plan.begin()?;
        let WgpuPlan { nodes, recorder } = plan;
        self.record_nodes(recorder, ctx, nodes.nodes())?;
        recorder.write_params()?;
        nodes.stamp(ctx);
        Ok(())
    }

    /// Submits `plan`'s recorded dispatches, recording them again first
    /// when the context changed since.
    fn compute_plan(&self, ctx: &Context, plan: GraphPlan, wait: bool) -> Result<()> {
        self.plans.with(self.name(), plan, |plan| {
            if !plan.nodes.is_current(ctx) {
                self.record_plan(ctx, plan)?;
            }
            plan.recorder.submit_steps(wait)
        })?
    }

    fn compute(&self, ctx: &Context, graph: Graph<'_>, wait: bool) -> Result<()> {
        let batch = self.recorder.lock().map_err(|_| self.device.gpu().error("recorder poisoned"))?;
        batch.record(graph.n_nodes(), wait, |recorder| self.record_nodes(recorder, ctx, graph.nodes()))
    }
}

impl Backend for WgpuBackend {
    fn name(&self) -> &str {
        self.device.name()
    }

    fn device(&self) -> &dyn Device {
        &self.device
    }

    fn graph_compute(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        match self.compute(ctx, graph, true) {
            Ok(()) => ComputeStatus::Success,
            Err(e) => ComputeStatus::Failed(e),
        }
    }

    fn graph_compute_async(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        match self.compute(ctx, graph, false) {
            Ok(()) => ComputeStatus::Success,
            Err(e) => ComputeStatus::Failed(e),
        }
    }

    fn supports_graph_plans(&self) -> bool {
        true
    }

    fn graph_plan_create(&self, ctx: &Context, graph: Graph<'_>) -> Result<GraphPlan> {
        let mut plan = WgpuPlan::new(ctx, graph, self.device.gpu());
        self.record_plan(ctx, &mut plan)?;
        Ok(self.plans.insert(plan))
    }

    fn graph_plan_update(&self, ctx: &Context, plan: GraphPlan, graph: Graph<'_>) -> Result<()> {
        self.plans.with(self.name(), plan, |plan| {
            plan.nodes.set(ctx, graph);
            self.record_plan(ctx, plan)
        })?
    }

    fn graph_plan_compute(&self, ctx: &Context, plan: GraphPlan) -> ComputeStatus {
        match self.compute_plan(ctx, plan, true) {
            Ok(()) => ComputeStatus::Success,
            Err(e) => ComputeStatus::Failed(e),
        }
    }

    fn graph_plan_compute_async(&self, ctx: &Context, plan: GraphPlan) -> ComputeStatus {
        match self.compute_plan(ctx, plan, false) {
            Ok(()) => ComputeStatus::Success,
            Err(e) => ComputeStatus::Failed(e),
        }
    }

    fn graph_plan_free(&self, plan: GraphPlan) -> Result<()> {
        self.plans.remove(self.name(), plan).map(drop)
    }

    /// Waits for Gantry's own submissions to this device's queue (those of
    /// every stream on the device: they share the queue), not for work a
    /// host submitted to the queue after them.
    fn synchronize(&self) -> Result<()> {
        self.device.gpu().wait_for_own_work()
    }

    fn is_done(&self) -> Result<bool> {
        self.device.gpu().is_idle()
    }

    fn event_record(&self, event: EventId) -> Result<()> {
        self.device.record_event(event)
    }

    /// Work submitted later runs after the event's point anyway: the device
    /// has one queue, which runs submissions in order.
    fn event_wait(&self, event: EventId) -> Result<()> {
        self.device.check_event(event)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
