//! The compute system: copy each split's inputs in, run the split on its
//! backend, record events for pipelining, and hand nodes to the eval callback.

use gantry_arenas::{EventId, TensorId};

use super::expert_copy::{ExpertScratch, copy_chosen_experts, expert_ids};
use super::pipeline::{SlotGuard, event_index};
use super::plans::SplitPlans;
use super::profiled::{ProfiledStream, SchedProfile};
use super::split::SplitTables;
use super::tables::Assignments;
use super::{BackendIndex, BackendSet};
use crate::alloc::TensorTable;
use crate::profile::SliceKind;
use crate::{AbortCallback, Context, Error, Graph, Name, Result, TensorFlags, tensor_copy_async_with};

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
    /// Polled before each split: `true` stops the compute with
    /// [`Error::Aborted`] (on any backend; a CPU's own callback also stops
    /// between nodes).
    pub abort: Option<&'a AbortCallback>,
    /// The profile, when one is on: each split, input copy and wait is
    /// recorded, and each split waited for, so its slice covers its work.
    pub profile: Option<&'a SchedProfile>,
}

impl ComputeInputs<'_> {
    fn event(&self, backend: BackendIndex) -> Option<EventId> {
        self.events.get(event_index(backend, self.cur_copy, self.n_copies)).copied().flatten()
    }
}

/// Runs every split of the placed graph in order (each split's nodes in the
/// optimize system's order, with its fused groups). Returns `Ok` when all ran or the
/// eval callback asked to stop, [`Error::Aborted`] when the abort callback
/// did; a failed backend status is an `Err` naming the backend and split. Without a callback, splits run from their graph
/// plans in `plans` from the placement's second compute on ([`SplitPlans`]).
pub fn compute_splits(
    ctx: &Context,
    inputs: &ComputeInputs<'_>,
    plans: &mut SplitPlans,
    experts: &mut ExpertScratch,
    mut callback: Option<&mut EvalCallback>,
) -> Result<()> {
    let set = inputs.set;
    let use_plans = callback.is_none() && plans.begin(inputs.tables.splits.len());
    for (s, split) in inputs.tables.splits.iter().enumerate() {
        if inputs.abort.is_some_and(|abort| abort()) {
            return Err(Error::Aborted);
        }
        let backend = set.backend(split.backend);
        let _span =
            tracing::trace_span!("split", index = s, backend = backend.name(), nodes = split.nodes.len()).entered();
        let profile = inputs.profile.map(|p| (p, split.backend));
        let split_start = profile.map_or(0, |(p, _)| p.profiler.now_ns());
        let stream = ProfiledStream { backend: backend.as_ref(), profile };
        let slot = SlotGuard { stream: &stream, event: inputs.event(split.backend) };
        // The optimize system's order and fused groups (an eval callback
        // sees every node: then nodes run one by one, unfused).
        let split_graph = inputs.tables.optimized.split_graph(inputs.tables, s);
        for k in split.inputs.clone() {
            let copy_start = profile.map_or(0, |(p, _)| p.profiler.now_ns());
            let input = inputs.tables.inputs[k];
            let copy = *inputs
                .tables
                .input_copies
                .get(k * inputs.n_copies)
                .ok_or_else(|| Error::Scheduler(format!("split {s} lost the copy of {}", ctx.describe(input))))?;
            let user_input = ctx.desc(input)?.flags.contains(TensorFlags::INPUT);
            let input_backend = set.backend(inputs.assigned.of(inputs.table, input).unwrap_or(set.cpu()));
            let mut bytes = ctx.desc(input)?.nbytes();
            let experts_only = if user_input { None } else { expert_ids(ctx, split_graph.nodes(), input, copy) };
            match experts_only {
                Some(ids) => {
                    // Ids that are a later input of this split are not copied
                    // in yet: they are read where they were computed.
                    let later = split
                        .inputs
                        .clone()
                        .filter(|&j| j > k)
                        .find(|&j| inputs.tables.input_copies.get(j * inputs.n_copies) == Some(&ids));
                    let (source, source_backend) = match later {
                        Some(j) => {
                            let original = inputs.tables.inputs[j];
                            (original, set.backend(inputs.assigned.of(inputs.table, original).unwrap_or(set.cpu())))
                        }
                        None => (ids, backend),
                    };
                    // The ids are final once their backend has finished.
                    source_backend.synchronize()?;
                    slot.copy_input(
                        true,
                        || {
                            bytes = match copy_chosen_experts(ctx, input, copy, source, experts)? {
                                Some(written) => written,
                                None => {
                                    ctx.copy_tensor(input, copy)?;
                                    bytes
                                }
                            };
                            Ok(())
                        },
                        |_| Ok(()),
                    )?;
                }
                None => slot.copy_input(
                    user_input,
                    || ctx.copy_tensor(input, copy),
                    |wait_slot| {
                        tensor_copy_async_with(ctx, input_backend.as_ref(), backend.as_ref(), input, copy, wait_slot)
                    },
                )?,
            }
            if let Some((p, b)) = profile {
                let d = ctx.desc(input)?;
                p.record(SliceKind::Copy, b, d.name, k as u32, copy_start, bytes as u64);
            }
        }
        let nodes = split_graph.nodes();
        if nodes.len() != split.nodes.len() {
            return Err(Error::Scheduler(format!(
                "split {s} has {} nodes in its run order, {} placed",
                nodes.len(),
                split.nodes.len()
            )));
        }
        // An abort is the caller's wish, not a backend failure: it stays
        // `Aborted`; a backend's failure keeps its kind.
        let fail = |e: Error| e.within_backend(backend.name(), format_args!("split {s}"));
        match callback.as_deref_mut() {
            None if use_plans => {
                plans.compute_async(s, split.backend, backend.as_ref(), ctx, split_graph).into_result().map_err(fail)?
            }
            None => backend.graph_compute_async(ctx, split_graph).into_result().map_err(fail)?,
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
        if let Some((p, b)) = profile {
            backend.synchronize()?;
            p.record(SliceKind::Split, b, Name::EMPTY, s as u32, split_start, 0);
        }
    }
    Ok(())
}
