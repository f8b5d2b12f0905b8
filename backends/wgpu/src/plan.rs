//! wgpu graph plans: every node's kernel planned, its pipeline fetched, its
//! bind group made and its parameters written into the plan's own uniform
//! buffer once, at create time; computing the plan encodes the recorded
//! dispatch list into one compute pass and submits it. Only the command
//! encoder is new per compute (wgpu command buffers are single-use).

use gantry_engine::{Context, Graph, PlannedNodes, Result};

use super::gpu::{Gpu, Recorder};
use gantry_engine::device_state::CommandBatch;

/// A recorded graph: the nodes it was recorded for and its dispatches.
pub(crate) struct WgpuPlan {
    pub nodes: PlannedNodes,
    pub recorder: Recorder,
}

impl WgpuPlan {
    /// An empty plan for `graph`'s nodes on `gpu` (recorded by the backend).
    pub fn new(ctx: &Context, graph: Graph<'_>, gpu: &std::sync::Arc<Gpu>) -> Self {
        Self { nodes: PlannedNodes::new(ctx, graph), recorder: Recorder::new(gpu) }
    }

    /// Starts recording the planned nodes again (the parameter buffer is
    /// kept when it is large enough).
    pub fn begin(&mut self) -> Result<()> {
        self.recorder.begin(self.nodes.nodes().len())
    }
}
