//! The alloc system: memory for a placed graph. The graph allocator plans
//! the split system's allocator graph (input copies interleaved with the
//! nodes, laid out in the allocator's own table: nothing is gathered twice)
//! over every backend's buffer type and binds each tensor; with pipeline
//! copies, the copies' memory then rotates between runs. Buffers grow only
//! within the devices' memory budgets ([`super::budget`]).

use super::BackendSet;
use super::budget::{Budgets, check_budgets};
use super::split::SplitTables;
use super::tables::{Assignments, CopyTable};
use crate::alloc::{BufferGrowth, GraphAllocator, TensorTable};
use crate::{Context, Error, Result};

/// Plans the placed graph (laid out in the allocator's table by the split
/// system) and sizes the allocator's buffers for it (nothing is bound).
/// A budget that the buffers would pass is an error before anything grows.
pub fn reserve_placed(
    ctx: &mut Context,
    allocator: &mut GraphAllocator,
    set: &BackendSet,
    budgets: &Budgets,
) -> Result<()> {
    let check = |ctx: &Context, growth: &BufferGrowth<'_>| check_budgets(ctx, set, budgets, growth);
    allocator.reserve_gathered(ctx, check).map(drop)
}

/// Binds every tensor of the placed graph to memory, planning again only
/// when the allocator graph changed. Before tensors move, every backend is
/// synchronized: nothing may still run on the old placement. Before a
/// buffer grows, the budgets are checked (an error allocates nothing).
pub fn alloc_placed(
    ctx: &mut Context,
    allocator: &mut GraphAllocator,
    set: &BackendSet,
    budgets: &Budgets,
) -> Result<()> {
    let synchronize_all = || set.backends().iter().try_for_each(|b| b.synchronize());
    let check = |ctx: &Context, growth: &BufferGrowth<'_>| check_budgets(ctx, set, budgets, growth);
    allocator.alloc_gathered(ctx, synchronize_all, check).map(drop)
}

/// Which pipeline copy's memory copy 0 sits in.
///
/// With pipeline copies, the graph always reads copy 0 of each input, and
/// the plan always puts copy 0 in slot 0, so the plan never changes between
/// runs; rotating moves copy 0 into slot `cur_copy`'s memory (and that
/// slot's placeholder into slot 0's), so consecutive runs use different
/// memory. Swapping is its own inverse: the previous swap is undone first.
#[derive(Debug, Default)]
pub struct PipelineRotation {
    rotated_to: usize,
}

/// What rotating reads: the placed graph's copies and where they live.
#[derive(Clone, Copy)]
pub struct RotationInputs<'a> {
    /// The backends.
    pub set: &'a BackendSet,
    /// Backend per tensor.
    pub assigned: &'a Assignments,
    /// The gathered graph the assignments index.
    pub table: &'a TensorTable,
    /// Copies per (tensor, backend, pipeline copy).
    pub copies: &'a CopyTable,
    /// The split inputs and their copies.
    pub tables: &'a SplitTables,
    /// Pipeline copies.
    pub n_copies: usize,
}

impl PipelineRotation {
    /// Binding put every tensor at its planned place: copy 0 is in slot 0.
    pub fn bound(&mut self) {
        self.rotated_to = 0;
    }

    /// Moves copy 0 of every pipelined tensor into the memory of slot `to`.
    pub fn rotate(&mut self, ctx: &mut Context, inputs: RotationInputs<'_>, to: usize) -> Result<()> {
        if self.rotated_to == to {
            return Ok(());
        }
        swap_pipeline_copy(ctx, inputs, self.rotated_to)?;
        self.rotated_to = 0;
        swap_pipeline_copy(ctx, inputs, to)?;
        self.rotated_to = to;
        Ok(())
    }
}

/// Swaps the memory of every copy 0 with that of its copy `c`.
fn swap_pipeline_copy(ctx: &mut Context, inputs: RotationInputs<'_>, c: usize) -> Result<()> {
    let RotationInputs { set, assigned, table, copies, tables: t, n_copies: n } = inputs;
    if n < 2 || c == 0 {
        return Ok(());
    }
    let graph_inputs = t.graph_inputs.iter().map(|&g| {
        let backend = assigned.of(table, g).unwrap_or(set.cpu());
        (g, copies.get(g, backend, 0), copies.get(g, backend, c))
    });
    let split_inputs = t
        .inputs
        .iter()
        .enumerate()
        .map(|(k, &i)| (i, t.input_copies.get(k * n).copied(), t.input_copies.get(k * n + c).copied()));
    for (input, active, slot) in graph_inputs.chain(split_inputs) {
        let (Some(active), Some(slot)) = (active, slot) else {
            continue;
        };
        let (Some(pa), Some(ps)) = (ctx.placement(active), ctx.placement(slot)) else {
            return Err(Error::Scheduler(format!("pipeline copy of {} has no memory", ctx.describe(input))));
        };
        ctx.place(active, ps.buffer, ps.offset)?;
        ctx.place(slot, pa.buffer, pa.offset)?;
    }
    Ok(())
}
