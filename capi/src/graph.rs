//! Graphs: the nodes computing a set of outputs, in order.

use std::sync::LazyLock;

use gantry::{Graph, GraphArena, TensorId};

use crate::context::{GantryContext, GantryTensor, check_tensor_count, tensor_id, with_context};
use crate::entry::{Failure, entry};
use crate::handles::{Table, lock};
use crate::ptr::{slice, write_out};
use crate::status::GantryStatus;

/// A graph: every tensor some outputs depend on, sources first. It
/// belongs to the context it was built in.
///
/// A zero-initialized value (`{0}`) is the null handle.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GantryGraph {
    /// The handle's number (0 = null). Opaque: only copy or compare it.
    pub id: u64,
}

/// A graph's lists, owned (the engine's graphs borrow an arena; these are
/// copied out once so a handle needs no borrow).
pub(crate) struct GraphEntry {
    pub(crate) ctx: u64,
    nodes: Vec<TensorId>,
    leafs: Vec<TensorId>,
    outputs: Vec<TensorId>,
}

impl GraphEntry {
    /// The engine's view of the lists.
    pub(crate) fn graph(&self) -> Graph<'_> {
        Graph::from_parts(&self.nodes, &self.leafs, &self.outputs)
    }

    /// Fails unless the graph was built in `ctx`.
    pub(crate) fn check_context(&self, ctx: GantryContext) -> Result<(), Failure> {
        if self.ctx == ctx.id { Ok(()) } else { Err(Failure::invalid("the graph was built in another context")) }
    }
}

pub(crate) static GRAPHS: LazyLock<Table<GraphEntry>> = LazyLock::new(|| Table::new("graph", 0x4752));

/// Builds the graph computing the `n` tensors `outputs` in `ctx` (ggml's
/// `build_forward_expand`): later changes to the context's tensors are not
/// seen by it; build again after adding ops.
///
/// Threading: as the context.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `outputs` is null or valid for `n` reads; `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_graph_build(
    ctx: GantryContext,
    outputs: *const GantryTensor,
    n: usize,
    out: *mut GantryGraph,
) -> GantryStatus {
    entry("gantry_graph_build", || {
        check_tensor_count("n", n)?;
        // SAFETY: the caller's contract.
        let outputs = unsafe { slice(outputs, n, "outputs")? };
        if n == 0 {
            return Err(Failure::invalid("a graph needs at least one output"));
        }
        if out.is_null() {
            return Err(Failure::invalid("out is a null pointer"));
        }
        let ids: Vec<TensorId> = outputs.iter().map(|&t| tensor_id(ctx, t)).collect::<Result<_, _>>()?;
        let entry = with_context(ctx, |c| {
            let arena = GraphArena::new();
            let g = c.build_graph(&arena, &ids)?;
            Ok(GraphEntry {
                ctx: ctx.id,
                nodes: g.nodes().to_vec(),
                leafs: g.leafs().to_vec(),
                outputs: g.outputs().to_vec(),
            })
        })?;
        // SAFETY: the caller's contract.
        unsafe { write_out(out, GantryGraph { id: GRAPHS.insert(entry) }, "out") }
    })
}

/// The number of nodes (computed tensors) in `graph`.
///
/// Threading: any thread.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `n_nodes` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_graph_n_nodes(graph: GantryGraph, n_nodes: *mut usize) -> GantryStatus {
    entry("gantry_graph_n_nodes", || {
        let g = GRAPHS.get(graph.id)?;
        let n = lock(&g, "graph")?.nodes.len();
        // SAFETY: the caller's contract.
        unsafe { write_out(n_nodes, n, "n_nodes") }
    })
}

/// Frees a graph (its tensors stay in the context).
///
/// Threading: any thread.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_graph_free(graph: GantryGraph) -> GantryStatus {
    entry("gantry_graph_free", || GRAPHS.remove(graph.id).map(drop))
}
