//! Placement: the assign, expand and split systems, run in order over one
//! graph, filling the per-run tables the alloc and compute systems read.

use gantry_arenas::BufferId;

use super::BackendSet;
use super::assign::assign_backends;
use super::expand::expand_assignments;
use super::split::{SplitInputs, SplitParams, SplitTables, split_graph};
use super::tables::{Assignments, CopyTable, Pins, Prealloc};
use crate::{Context, Graph, Result};

/// The per-run component tables the placement systems fill.
#[derive(Debug, Default)]
pub struct RunTables {
    /// Backend per tensor, and why.
    pub assigned: Assignments,
    /// Copies per (tensor, backend, pipeline copy).
    pub copies: CopyTable,
    /// Splits, inputs, rewrites, and the allocator's graph.
    pub split: SplitTables,
    /// Pre-allocated buffer per tensor.
    pub prealloc: Prealloc,
}

/// What placement reads besides the context and the graph: the scheduler's
/// settings.
#[derive(Clone, Copy)]
pub struct PlacementInputs<'a> {
    /// The backends, in priority order.
    pub set: &'a BackendSet,
    /// The scheduler's own compute buffers (tensors in them are not
    /// pre-allocated: they are bound again every run).
    pub own_buffers: &'a [BufferId],
    /// The user's pins.
    pub pins: &'a Pins,
    /// Whether a higher-priority backend may take ops over host weights.
    pub op_offload: bool,
    /// Pipeline copies and the split input limit.
    pub split: SplitParams,
}

/// Runs assign, expand and split over `graph`. The tables must have been
/// undone (`SplitTables::undo`) since the previous run.
pub fn place_graph(
    ctx: &mut Context,
    graph: Graph<'_>,
    inputs: PlacementInputs<'_>,
    run: &mut RunTables,
) -> Result<()> {
    let PlacementInputs { set, own_buffers, pins, op_offload, split } = inputs;
    let capacity = ctx.slot_capacity();
    run.assigned.begin(capacity);
    run.copies.begin(capacity, set.len(), split.n_copies);
    run.prealloc.fill(ctx, graph, own_buffers, set)?;
    assign_backends(ctx, graph, set, &run.prealloc, pins, op_offload, &mut run.assigned)?;
    expand_assignments(ctx, graph, set, &run.prealloc, &mut run.assigned)?;
    let split_inputs = SplitInputs { set, pre: &run.prealloc, assigned: &run.assigned, params: split };
    split_graph(ctx, graph, split_inputs, &mut run.copies, &mut run.split)
}
