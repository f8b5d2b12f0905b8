//! The alloc system: memory for a placed graph. The graph allocator plans
//! the split system's allocator graph (input copies interleaved with the
//! nodes, laid out in the allocator's own table: nothing is gathered twice)
//! over every backend's buffer type and binds each tensor; with pipeline
//! copies, the copies' memory then rotates between runs. Buffers grow only
//! within the devices' memory budgets ([`super::budget`]).

use gantry_arenas::TensorId;

use super::budget::{Budgets, check_budgets};
use super::split::{MadeCopy, SplitTables};
use super::tables::{Assignments, CopyTable, UNASSIGNED};
use super::{BackendSet, MAX_BACKENDS};
use crate::alloc::tensor_table::Role;
use crate::alloc::{BufferGrowth, GraphAllocator, TensorTable};
use crate::{Context, Error, MAX_SRC, Name, Op, Result, TensorDesc, TensorFlags};

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

/// What laying out the allocator's graph reads.
#[derive(Clone, Copy)]
pub struct AllocGraphInputs<'a> {
    /// The backends.
    pub set: &'a BackendSet,
    /// Backend per tensor.
    pub assigned: &'a Assignments,
    /// Copies per (tensor, backend, pipeline copy).
    pub copies: &'a CopyTable,
    /// Pipeline copies.
    pub n_copies: usize,
}

/// Lays out the allocator's graph in the gathered `table`: the copies made
/// and, per split, a dependency marker per input (a view of its source that
/// keeps the source alive until the copy is made) and its copy before the
/// split's nodes; the leafs are the pipeline copies (allocated first, never
/// freed) and then the graph's leafs. Every entry gets its backend's buffer
/// type, and rewritten sources read their copies.
pub fn build_alloc_graph(
    ctx: &mut Context,
    table: &mut TensorTable,
    inputs: AllocGraphInputs<'_>,
    out: &mut SplitTables,
) -> Result<()> {
    let AllocGraphInputs { set, assigned, copies, n_copies } = inputs;
    let dense = |table: &TensorTable, t: TensorId| {
        table
            .lookup(t)
            .map(|d| d as usize)
            .ok_or_else(|| Error::Scheduler(format!("{t:?} is not in the gathered graph")))
    };
    // Every entry's memory goes to its backend's buffer type (the CPU's when
    // unassigned), looked up per backend once.
    let mut buft_of = [set.alloc_buft(set.cpu()); MAX_BACKENDS + 1];
    for b in set.indices() {
        buft_of[b.get()] = set.alloc_buft(b);
    }
    let backends = assigned.backend_bytes().iter().chain(std::iter::repeat(&UNASSIGNED));
    for (buft, &b) in table.buft.as_mut_slice().iter_mut().zip(backends) {
        *buft = buft_of[usize::from(b).min(MAX_BACKENDS)];
    }
    for &MadeCopy { copy, backend } in &out.made {
        let d = table.push_added(ctx, copy, Role::Leaf)? as usize;
        table.set_buft(d, set.alloc_buft(backend));
    }
    for r in &out.rewrites {
        let (node, copy) = (dense(table, r.node)?, dense(table, r.copy)?);
        table.set_src(node, r.slot as usize, copy as u32);
    }
    table.clear_walk();
    if n_copies > 1 {
        for &input in &out.graph_inputs {
            let b = assigned.of(table, input).unwrap_or(set.cpu());
            for c in 0..n_copies {
                let copy = copies.get(input, b, c).unwrap_or(input);
                let d = dense(table, copy)?;
                table.walk_leaf(d);
            }
        }
        for &copy in &out.input_copies {
            let d = dense(table, copy)?;
            table.walk_leaf(d);
        }
    }
    for i in 0..table.leaf_dense.len() {
        let d = table.leaf_dense[i] as usize;
        table.walk_leaf(d);
    }
    for s in 0..out.splits.len() {
        let (inputs, nodes) = {
            let sp = &out.splits[s];
            (sp.inputs.clone(), sp.nodes.clone())
        };
        for k in inputs {
            let input = out.inputs[k];
            let copy = out.input_copies[k * n_copies];
            let d = *ctx.desc(input)?;
            // Op NONE with a view source: a dependency marker (ggml-alloc's
            // convention), counted as a consumer of `input`, never as a view.
            let dep = ctx.insert_scratch(TensorDesc {
                op: Op::None,
                srcs: {
                    let mut s = [None; MAX_SRC];
                    s[0] = Some(input);
                    s
                },
                view_src: Some(d.view_src.unwrap_or(input)),
                view_offset: if d.view_src.is_some() { d.view_offset } else { 0 },
                flags: TensorFlags::NONE,
                name: Name::EMPTY,
                ..d
            });
            out.created.push(dep);
            let dep_d = table.push_added(ctx, dep, Role::Node)? as usize;
            let input_d = dense(table, input)?;
            let input_buft = table.buft[input_d];
            table.set_buft(dep_d, input_buft);
            table.walk_node(dep_d);
            let copy_d = dense(table, copy)?;
            table.walk_node(copy_d);
        }
        // The optimize system's order (the graph's when it changed nothing).
        match out.optimized.dense.get(nodes.clone()) {
            Some(run_order) => run_order.iter().for_each(|&d| table.walk_node(d as usize)),
            None => nodes.for_each(|i| table.walk_node(table.node_dense[i] as usize)),
        }
    }
    Ok(())
}
