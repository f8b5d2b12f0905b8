//! Placement: gather the graph into the allocator's table (one look at each
//! tensor), then run the assign, expand, split and optimize systems over it,
//! filling the per-run tables the alloc and compute systems read.

use gantry_arenas::BufferId;

use super::BackendSet;
use super::alloc::{AllocGraphInputs, build_alloc_graph};
use super::assign::assign_backends;
use super::expand::expand_assignments;
use super::gathered::Gathered;
use super::optimize::optimize_splits;
use super::split::{SplitInputs, SplitParams, SplitTables, split_graph};
use super::tables::{Assignments, CopyTable, Pins, Prealloc, Support};
use crate::alloc::TensorTable;
use crate::{Context, Graph, Result};

/// The per-run component tables the placement systems fill (beside the
/// gathered graph, which lives in the allocator's table).
#[derive(Debug, Default)]
pub struct RunTables {
    /// Backend per tensor, and why.
    pub assigned: Assignments,
    /// Copies per (tensor, backend, pipeline copy).
    pub copies: CopyTable,
    /// Splits, inputs, rewrites.
    pub split: SplitTables,
    /// The pre-allocated buffers the graph reads.
    pub prealloc: Prealloc,
    /// Which backends run each op.
    pub support: Support,
    /// The expand system's list of nodes that compute, in walk order.
    pub spread_order: Vec<u32>,
}

/// What placement reads besides the context and the graph: the scheduler's
/// settings.
#[derive(Clone, Copy)]
pub struct PlacementInputs<'a> {
    /// The backends, in priority order.
    pub set: &'a BackendSet,
    /// The user's pins.
    pub pins: &'a Pins,
    /// Whether a higher-priority backend may take ops over host weights.
    pub op_offload: bool,
    /// Pipeline copies and the split input limit.
    pub split: SplitParams,
    /// Whether backends may rewrite their splits (the optimize system).
    pub graph_optimize: bool,
}

/// Gathers `graph` into `table` (tensors in `own_buffers` are not
/// pre-allocated: the allocator binds them again), then runs assign, expand,
/// split and optimize over it and lays out the allocator's graph in the table
/// (in the optimized order, with the optimize system's edges). The
/// tables must have been undone (`SplitTables::undo`) since the previous run.
pub fn place_graph(
    ctx: &mut Context,
    graph: Graph<'_>,
    inputs: PlacementInputs<'_>,
    (table, own_buffers): (&mut TensorTable, &[BufferId]),
    run: &mut RunTables,
) -> Result<()> {
    let PlacementInputs { set, pins, op_offload, split, graph_optimize } = inputs;
    table.gather(ctx, graph, own_buffers)?;
    let capacity = ctx.slot_capacity();
    run.assigned.begin(table.len());
    run.copies.begin(capacity, set.len(), split.n_copies);
    run.prealloc.fill(ctx, table, set)?;
    run.support.begin(table, set);
    let g = Gathered { ctx, set, table, pre: &run.prealloc, support: &run.support };
    assign_backends(g, pins, op_offload, &mut run.assigned)?;
    expand_assignments(g, &mut run.spread_order, &mut run.assigned)?;
    let split_inputs = SplitInputs { set, table, pre: &run.prealloc, assigned: &run.assigned, params: split };
    split_graph(ctx, split_inputs, &mut run.copies, &mut run.split)?;
    optimize_splits(ctx, set, table, &mut run.split, graph_optimize)?;
    let alloc_inputs = AllocGraphInputs { set, assigned: &run.assigned, copies: &run.copies, n_copies: split.n_copies };
    build_alloc_graph(ctx, table, alloc_inputs, &mut run.split)
}
