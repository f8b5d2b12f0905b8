//! Graph plans (ggml's `graph_plan_create / update / compute / free`): the
//! work for one graph on one backend, made once and computed many times —
//! what an embedder runs every frame, and what the scheduler runs for a
//! split whose graph did not change.
//!
//! A plan is a [`GraphPlan`] handle into its backend's [`PlanTable`]. What a
//! plan holds is the backend's business (the CPU: each node's kernel checks
//! done and its scratch sized; wgpu: the pipelines, bind groups and dispatch
//! list; CUDA: the launches and their CUDA graph); what every plan shares is
//! [`PlannedNodes`]: the node list it was made for and the context revision
//! it was checked at. A context changed since (a tensor re-placed, a buffer
//! freed, a description edited: [`Context::revision`]) makes the backend
//! check the nodes again before computing, so a plan never computes with a
//! stale placement; tensor data written in between changes nothing.

use std::sync::atomic::{AtomicU64, Ordering};

use gantry_arenas::slotmap::SlotMap;
use gantry_arenas::{PlanId, TensorId};

use crate::sync::{Mutex, lock};
use crate::{Context, Error, Graph, Result};

/// A graph plan of one backend: created by [`crate::Backend::graph_plan_create`],
/// computed by [`crate::Backend::graph_plan_compute`], freed by
/// [`crate::Backend::graph_plan_free`]. The handle names the backend's plan
/// table too, so a plan handed to another backend is an error, not another
/// plan, and a freed plan's handle is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GraphPlan {
    table: u64,
    id: PlanId,
}

/// The nodes a plan was made for, and the context revision they were
/// checked at.
#[derive(Debug, Default)]
pub struct PlannedNodes {
    nodes: Vec<TensorId>,
    revision: u64,
}

impl PlannedNodes {
    /// The nodes of `graph`, checked now.
    pub fn new(ctx: &Context, graph: Graph<'_>) -> Self {
        let mut planned = Self::default();
        planned.set(ctx, graph);
        planned
    }

    /// Takes the nodes of `graph` (reusing the list's memory: a graph of at
    /// most as many nodes allocates nothing) and stamps the revision.
    pub fn set(&mut self, ctx: &Context, graph: Graph<'_>) {
        self.nodes.clear();
        self.nodes.extend_from_slice(graph.nodes());
        self.revision = ctx.revision();
    }

    /// The planned nodes.
    pub fn nodes(&self) -> &[TensorId] {
        &self.nodes
    }

    /// The planned nodes as a graph.
    pub fn graph(&self) -> Graph<'_> {
        Graph::from_parts(&self.nodes, &[], &[])
    }

    /// Whether nothing in `ctx` changed since the nodes were checked.
    pub fn is_current(&self, ctx: &Context) -> bool {
        self.revision == ctx.revision()
    }

    /// Notes that the nodes were checked against `ctx` as it is now.
    pub fn stamp(&mut self, ctx: &Context) {
        self.revision = ctx.revision();
    }
}

/// Distinguishes the plan tables of a process.
static NEXT_TABLE: AtomicU64 = AtomicU64::new(1);

/// A backend's plans by handle, behind a lock (a backend is shared between
/// threads). Backends keep one and answer the plan methods through it.
pub struct PlanTable<P> {
    table: u64,
    plans: Mutex<SlotMap<PlanId, P>>,
}

impl<P> Default for PlanTable<P> {
    fn default() -> Self {
        Self { table: NEXT_TABLE.fetch_add(1, Ordering::Relaxed), plans: Mutex::new(SlotMap::with_key()) }
    }
}

impl<P> PlanTable<P> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `plan` and returns its handle.
    pub fn insert(&self, plan: P) -> GraphPlan {
        GraphPlan { table: self.table, id: lock(&self.plans).insert(plan) }
    }

    /// Runs `f` on plan `plan` with the table locked (plans of one backend
    /// compute one at a time, as its graphs do); `Err` naming `backend`
    /// when the handle is another backend's or was freed.
    pub fn with<R>(&self, backend: &str, plan: GraphPlan, f: impl FnOnce(&mut P) -> R) -> Result<R> {
        let mut plans = lock(&self.plans);
        let entry = if plan.table == self.table { plans.get_mut(plan.id) } else { None };
        let entry = entry.ok_or_else(|| stale(backend, plan))?;
        Ok(f(entry))
    }

    /// Removes plan `plan` and returns it.
    pub fn remove(&self, backend: &str, plan: GraphPlan) -> Result<P> {
        let removed = if plan.table == self.table { lock(&self.plans).remove(plan.id) } else { None };
        removed.ok_or_else(|| stale(backend, plan))
    }

    /// Number of live plans.
    pub fn len(&self) -> usize {
        lock(&self.plans).len()
    }

    /// Whether no plan is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn stale(backend: &str, plan: GraphPlan) -> Error {
    Error::StaleHandle { kind: "graph plan", handle: format!("{:?} (not a live plan of backend {backend})", plan.id) }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn handles_are_per_table_and_die_with_their_plan() {
        let a: PlanTable<u32> = PlanTable::new();
        let b: PlanTable<u32> = PlanTable::new();
        let pa = a.insert(7);
        let pb = b.insert(9);
        assert_eq!(a.with("A", pa, |p| *p).unwrap(), 7);
        let err = a.with("A", pb, |p| *p).unwrap_err();
        assert!(err.to_string().contains("graph plan") && err.to_string().contains("backend A"), "{err}");
        assert_eq!(a.remove("A", pa).unwrap(), 7);
        assert!(a.with("A", pa, |_| ()).is_err(), "a freed plan's handle is stale");
        assert!(a.remove("A", pa).is_err());
        assert!(a.is_empty() && b.len() == 1);
    }

    #[test]
    fn planned_nodes_follow_the_context_revision() {
        let mut ctx = Context::new();
        let x = ctx.tensor(crate::DType::F32, [4]).unwrap();
        let y = ctx.neg(x).unwrap();
        let arena = crate::GraphArena::new();
        let graph = ctx.build_graph(&arena, &[y]).unwrap();
        let mut planned = PlannedNodes::new(&ctx, graph);
        assert_eq!(planned.nodes(), graph.nodes());
        assert!(planned.is_current(&ctx));
        ctx.set_name(y, "renamed").unwrap();
        assert!(!planned.is_current(&ctx), "a description changed since the check");
        planned.stamp(&ctx);
        assert!(planned.is_current(&ctx));
    }
}
