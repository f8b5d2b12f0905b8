//! CPU graph plans (ggml's `ggml_graph_plan` + `ggml_graph_compute`): at
//! create time every node is checked once (op and dtypes supported, memory
//! in place), the nodes that compute nothing (views, empty tensors) are left
//! out, each node gets its thread count (the task split: the whole pool for
//! the products and attention, whose drivers split their own work, and what
//! an element-wise node's size is worth for the rest), and the shared work
//! buffer is sized for the largest node. Computing a plan then only runs
//! kernels; a context changed since the check is checked again first.

use gantry_engine::{Context, Error, Graph, Op, PlannedNodes, Result, TensorId};

use super::ops;
use super::parallel::MIN_WORK_PER_THREAD;

/// One node to run and the threads its work is split over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step {
    pub node: TensorId,
    pub threads: usize,
}

/// A CPU plan: the checked steps and the work buffer size.
#[derive(Debug)]
pub(crate) struct CpuPlan {
    nodes: PlannedNodes,
    steps: Vec<Step>,
    /// Floats of shared scratch the largest node needs.
    work_floats: usize,
    /// The pool size the steps were split for.
    n_threads: usize,
}

impl CpuPlan {
    /// Checks and splits `graph` for a pool of `n_threads` threads.
    pub fn new(ctx: &Context, graph: Graph<'_>, n_threads: usize) -> Result<Self> {
        let mut plan = Self { nodes: PlannedNodes::new(ctx, graph), steps: Vec::new(), work_floats: 0, n_threads };
        plan.check(ctx, n_threads)?;
        Ok(plan)
    }

    /// Points the plan at `graph`, reusing its lists.
    pub fn update(&mut self, ctx: &Context, graph: Graph<'_>, n_threads: usize) -> Result<()> {
        self.nodes.set(ctx, graph);
        self.check(ctx, n_threads)
    }

    /// Checks the planned nodes against `ctx` as it is now, unless nothing
    /// changed since the last check and the pool has the same size.
    pub fn refresh(&mut self, ctx: &Context, n_threads: usize) -> Result<()> {
        if self.nodes.is_current(ctx) && self.n_threads == n_threads {
            return Ok(());
        }
        self.check(ctx, n_threads)
    }

    /// The steps to run.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Floats of shared scratch the plan needs.
    pub fn work_floats(&self) -> usize {
        self.work_floats
    }

    fn check(&mut self, ctx: &Context, n_threads: usize) -> Result<()> {
        self.steps.clear();
        self.work_floats = 0;
        self.n_threads = n_threads;
        for &node in self.nodes.nodes() {
            let d = ctx.desc(node)?;
            if !ops::computes_anything(d) {
                continue;
            }
            if !ops::supports_op(ctx, node) {
                return Err(ops::unsupported(ctx, node, d));
            }
            for t in std::iter::once(node).chain(d.sources()) {
                if !ctx.is_allocated(t) {
                    return Err(Error::NotAllocated(format!(
                        "{} (read by {} {})",
                        ctx.describe(t),
                        d.op.name(),
                        ctx.describe(node)
                    )));
                }
            }
            let threads = match d.op {
                Op::MulMat | Op::FlashAttnExt { .. } => n_threads,
                _ => (d.nelements() / MIN_WORK_PER_THREAD + 1).min(n_threads),
            };
            self.work_floats = self.work_floats.max(ops::work_floats(ctx, node, d, n_threads)?);
            self.steps.push(Step { node, threads: threads.max(1) });
        }
        self.nodes.stamp(ctx);
        Ok(())
    }
}
