//! CPU graph plans (ggml's `ggml_graph_plan` + `ggml_graph_compute`): at
//! create time every node is checked once (op and dtypes supported, memory
//! in place), the nodes that compute nothing (views, empty tensors) are left
//! out, each node gets its thread count (the task split: the whole pool for
//! the products and attention, whose drivers split their own work, and what
//! an element-wise node's size is worth for the rest), and the shared work
//! buffer is sized for the largest node. A fused group the scheduler marked
//! ([`Graph::fused`]) is one step on the whole pool, its nodes checked as
//! the others. Computing a plan then only runs kernels; a context changed
//! since the check is checked again first.

use gantry_engine::sched::{FusedGroup, FusionKind};
use gantry_engine::{Context, Error, Graph, Op, PlannedNodes, Result, TensorId};

use super::ops;
use super::parallel::MIN_WORK_PER_THREAD;

/// One node (or fused group) to run and the threads its work is split over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step {
    /// The node (a group's first node).
    pub node: TensorId,
    pub threads: usize,
    /// For a fused group: its kind and its nodes' positions in the plan's
    /// node list.
    pub group: Option<(FusionKind, u32, u32)>,
}

/// A CPU plan: the checked steps and the work buffer size.
#[derive(Debug)]
pub(crate) struct CpuPlan {
    nodes: PlannedNodes,
    /// The graph's fused groups (kept sorted by position).
    fused: Vec<FusedGroup>,
    steps: Vec<Step>,
    /// Floats of shared scratch the largest node needs.
    work_floats: usize,
    /// The pool size the steps were split for.
    n_threads: usize,
}

impl CpuPlan {
    /// Checks and splits `graph` for a pool of `n_threads` threads.
    pub fn new(ctx: &Context, graph: Graph<'_>, n_threads: usize) -> Result<Self> {
        let mut plan = Self {
            nodes: PlannedNodes::new(ctx, graph),
            fused: graph.fused().to_vec(),
            steps: Vec::new(),
            work_floats: 0,
            n_threads,
        };
        plan.check(ctx, n_threads)?;
        Ok(plan)
    }

    /// Points the plan at `graph`, reusing its lists.
    pub fn update(&mut self, ctx: &Context, graph: Graph<'_>, n_threads: usize) -> Result<()> {
        self.nodes.set(ctx, graph);
        self.fused.clear();
        self.fused.extend_from_slice(graph.fused());
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

    /// The nodes of a step: its group's, or its one node.
    pub fn members<'a>(&'a self, step: &'a Step) -> &'a [TensorId] {
        match step.group {
            Some((_, start, len)) => self.nodes.nodes().get(start as usize..(start + len) as usize).unwrap_or(&[]),
            None => std::slice::from_ref(&step.node),
        }
    }

    /// Floats of shared scratch the plan needs.
    pub fn work_floats(&self) -> usize {
        self.work_floats
    }

    /// Whether position `i` is inside a group a step runs.
    fn in_group(&self, i: usize) -> bool {
        self.steps
            .last()
            .and_then(|s| s.group)
            .is_some_and(|(_, start, len)| (start as usize..(start + len) as usize).contains(&i))
    }

    fn check(&mut self, ctx: &Context, n_threads: usize) -> Result<()> {
        self.steps.clear();
        self.work_floats = 0;
        self.n_threads = n_threads;
        let mut groups = self.fused.iter().peekable();
        for (i, &node) in self.nodes.nodes().iter().enumerate() {
            let d = ctx.desc(node)?;
            while groups.next_if(|g| (g.start as usize) < i).is_some() {}
            let group = groups.peek().filter(|g| g.start as usize == i).map(|g| g.range());
            if let Some(range) = group.clone()
                && let Some(members) = self.nodes.nodes().get(range.clone())
                // Views may sit inside a group (a reshape between fused nodes);
                // an empty member leaves the group to run node by node.
                && members.iter().all(|&m| ctx.get(m).is_some_and(|md| md.nelements() > 0))
                && ops::computes_anything(d)
                && let Some(g) = groups.next()
            {
                // Every member is checked below as the node it is; the group
                // runs as one step on the whole pool.
                self.steps.push(Step { node, threads: n_threads.max(1), group: Some((g.kind, g.start, g.len)) });
            }
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
                // Their kernels weigh their own work (a GLU's exponentials
                // cost several times an element's load and store: 16 decoding
                // sequences' 24 K values took 28 µs on one thread).
                Op::MulMat | Op::MulMatId | Op::FlashAttnExt { .. } | Op::Glu { .. } | Op::SwigluOai { .. } => {
                    n_threads
                }
                _ => (d.nelements() / MIN_WORK_PER_THREAD + 1).min(n_threads),
            };
            self.work_floats = self.work_floats.max(ops::work_floats(ctx, node, d, n_threads)?);
            if !self.in_group(i) {
                self.steps.push(Step { node, threads: threads.max(1), group: None });
            }
        }
        self.nodes.stamp(ctx);
        Ok(())
    }
}
