//! Graph plans per split: a split computed again with the same placement
//! (its graph unchanged) runs from its backend's graph plan
//! ([`crate::Backend::graph_plan_create`]), made at its second compute —
//! as CUDA graphs are captured, so a graph placed for one compute only pays
//! for no plan. A new placement frees every plan. Backends without plans,
//! and splits whose plan could not be made, run with `graph_compute_async`.

use super::{BackendIndex, BackendSet};
use crate::{Backend, ComputeStatus, Context, Graph, GraphPlan};

/// What a split runs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SplitPlan {
    /// No plan yet.
    Untried,
    /// Its plan on its backend.
    Plan(BackendIndex, GraphPlan),
    /// Its backend has no plans, or making one failed: computed directly.
    Direct,
}

/// The plans of the current placement's splits (a column by split index).
#[derive(Debug, Default)]
pub struct SplitPlans {
    plans: Vec<SplitPlan>,
    /// Computes since the placement was made.
    computes: u64,
}

impl SplitPlans {
    /// Frees every plan (the placement changed or is going away).
    pub fn release(&mut self, set: &BackendSet) {
        for plan in self.plans.drain(..) {
            if let SplitPlan::Plan(b, p) = plan {
                // A backend that cannot free its plan keeps it until it is dropped.
                let _ = set.backend(b).graph_plan_free(p);
            }
        }
        self.computes = 0;
    }

    /// Number of plans made for the current placement.
    pub fn live(&self) -> usize {
        self.plans.iter().filter(|p| matches!(p, SplitPlan::Plan(..))).count()
    }

    /// Starts a compute of `n_splits` splits; returns whether plans are used
    /// in it (from the placement's second compute on).
    pub fn begin(&mut self, n_splits: usize) -> bool {
        self.computes += 1;
        if self.plans.len() != n_splits {
            self.plans.resize(n_splits, SplitPlan::Untried);
        }
        self.computes > 1
    }

    /// Starts computing split `s` (nodes `nodes`) on `backend` (index `b`):
    /// from its plan, made now if it has none yet.
    pub fn compute_async(
        &mut self,
        s: usize,
        b: BackendIndex,
        backend: &dyn Backend,
        ctx: &Context,
        nodes: Graph<'_>,
    ) -> ComputeStatus {
        let Some(slot) = self.plans.get_mut(s) else { return backend.graph_compute_async(ctx, nodes) };
        if *slot == SplitPlan::Untried {
            *slot = if backend.supports_graph_plans() {
                match backend.graph_plan_create(ctx, nodes) {
                    Ok(plan) => SplitPlan::Plan(b, plan),
                    // Computing directly reports the same failure, if it is one.
                    Err(_) => SplitPlan::Direct,
                }
            } else {
                SplitPlan::Direct
            };
        }
        match *slot {
            SplitPlan::Plan(_, plan) => backend.graph_plan_compute_async(ctx, plan),
            SplitPlan::Untried | SplitPlan::Direct => backend.graph_compute_async(ctx, nodes),
        }
    }
}
