//! The placement systems run in order: assign, expand, in-place, split.

use gantry_arenas::{BufferId, TensorId};
use slotmap::SecondaryMap;

use super::assign::assign_preallocated;
use super::backend_set::BackendSet;
use super::expand::expand_assignments;
use super::in_place::place_in_place_nodes;
use super::split::{SplitParams, SplitTables, split_graph};
use super::tables::{Assignments, CopyTable, Prealloc};
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

/// Runs passes 1 to 5 over `graph`. The tables must have been undone
/// (`SplitTables::undo`) since the previous run.
pub fn place_graph(
    ctx: &mut Context,
    graph: Graph<'_>,
    set: &BackendSet,
    own: &[BufferId],
    pins: &SecondaryMap<TensorId, u8>,
    op_offload: bool,
    params: SplitParams,
    run: &mut RunTables,
) -> Result<()> {
    let capacity = ctx.slot_capacity();
    run.assigned.begin(capacity);
    run.copies.begin(capacity, set.len(), params.n_copies);
    run.prealloc.fill(ctx, graph, own, set)?;
    assign_preallocated(ctx, graph, set, &run.prealloc, pins, op_offload, &mut run.assigned)?;
    expand_assignments(ctx, graph, set, &run.prealloc, &mut run.assigned)?;
    place_in_place_nodes(ctx, graph, set, &run.prealloc, &mut run.assigned)?;
    split_graph(ctx, graph, set, &run.prealloc, &run.assigned, &mut run.copies, params, &mut run.split)
}
