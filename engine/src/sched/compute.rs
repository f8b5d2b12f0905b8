//! The compute system: copy each split's inputs in, run the split on its
//! backend, record events for pipelining, and hand nodes to the eval callback.

use gantry_arenas::{EventId, TensorId};

use super::pipeline::{SlotGuard, event_index};
use super::split::SplitTables;
use super::tables::Assignments;
use super::{BackendIndex, BackendSet};
use crate::alloc::TensorTable;
use crate::{Context, Error, Graph, Result, TensorFlags};

/// Asked twice per node the user may want: first `(ctx, node, true)` —
/// "do you want to see this node?" — then, once it is computed and its
/// backend synchronized, `(ctx, node, false)` — "here it is; keep going?".
/// Returning `false` to the second call stops the whole compute.
pub type EvalCallback = Box<dyn FnMut(&Context, TensorId, bool) -> bool + Send>;

/// What compute needs from the scheduler, borrowed for one call.
pub struct ComputeInputs<'a> {
    /// The backends.
    pub set: &'a BackendSet,
    /// Backend per tensor.
    pub assigned: &'a Assignments,
    /// The gathered graph the assignments index.
    pub table: &'a TensorTable,
    /// The splits.
    pub tables: &'a SplitTables,
    /// Pipeline copy of this run.
    pub cur_copy: usize,
    /// Pipeline copies.
    pub n_copies: usize,
    /// One event per (backend, copy) where the device has events.
    pub events: &'a [Option<EventId>],
}

impl ComputeInputs<'_> {
    fn event(&self, backend: BackendIndex) -> Option<EventId> {
        self.events.get(event_index(backend, self.cur_copy, self.n_copies)).copied().flatten()
    }
}

/// Runs every split of `graph` in order. Returns `Ok` when all ran or the
/// eval callback asked to stop; a failed backend status is an `Err` naming
/// the backend and split.
pub fn compute_splits(
    ctx: &Context,
    graph: Graph<'_>,
    inputs: &ComputeInputs<'_>,
    mut callback: Option<&mut EvalCallback>,
) -> Result<()> {
    let set = inputs.set;
    for (s, split) in inputs.tables.splits.iter().enumerate() {
        let backend = set.backend(split.backend);
        let _span =
            tracing::trace_span!("split", index = s, backend = backend.name(), nodes = split.nodes.len()).entered();
        let slot = SlotGuard { stream: backend.as_ref(), event: inputs.event(split.backend) };
        for k in split.inputs.clone() {
            let input = inputs.tables.inputs[k];
            let copy = *inputs
                .tables
                .input_copies
                .get(k * inputs.n_copies)
                .ok_or_else(|| Error::Scheduler(format!("split {s} lost the copy of {}", ctx.describe(input))))?;
            let user_input = ctx.desc(input)?.flags.contains(TensorFlags::INPUT);
            let input_backend = set.backend(inputs.assigned.of(inputs.table, input).unwrap_or(set.cpu()));
            slot.copy_input(
                user_input,
                || backend.cpy_tensor_async(input_backend.as_ref(), ctx, input, copy),
                || input_backend.synchronize(),
                || ctx.copy_tensor(input, copy),
            )?;
        }
        let nodes = &graph.nodes()[split.nodes.clone()];
        let fail = |e: Error| Error::Backend { backend: backend.name().to_owned(), reason: format!("split {s}: {e}") };
        match callback.as_deref_mut() {
            None => backend.graph_compute_async(ctx, Graph::from_parts(nodes, &[], &[])).into_result().map_err(fail)?,
            Some(cb) => {
                let mut j0 = 0;
                while j0 < nodes.len() {
                    // Compute the longest run of nodes the user does not want to see, plus the one they do.
                    let mut j1 = j0;
                    let mut want = cb(ctx, nodes[j1], true);
                    while !want && j1 + 1 < nodes.len() {
                        j1 += 1;
                        want = cb(ctx, nodes[j1], true);
                    }
                    backend
                        .graph_compute_async(ctx, Graph::from_parts(&nodes[j0..=j1], &[], &[]))
                        .into_result()
                        .map_err(fail)?;
                    backend.synchronize()?;
                    if want && !cb(ctx, nodes[j1], false) {
                        return Ok(());
                    }
                    j0 = j1 + 1;
                }
            }
        }
        slot.computed(!split.inputs.is_empty())?;
    }
    Ok(())
}
