//! Which graph the current placement was made for, so that the same graph
//! again, in a context nothing has changed since, keeps its placement.
//!
//! Placement (assign, expand, split) and the allocator read only the graph's node,
//! leaf and output lists, the descriptions and placements of tensors, the
//! buffers and their usage, the user's pins and the backends' answers to
//! `supports_op` / `offload_op` (which depend on a tensor's description
//! only). The lists are compared element by element; everything in the
//! context is covered by [`Context::revision`], which every such change
//! bumps. Pins and pipeline settings are the scheduler's own: changing them
//! forgets the record. So an equal record means the same splits, copies and
//! memory plan — reusing them is not a guess.

use gantry_arenas::TensorId;

use crate::{Context, Graph};

/// The graph last placed and the context revision it was last seen at.
#[derive(Debug, Default)]
pub struct PlacedGraph {
    nodes: Vec<TensorId>,
    leafs: Vec<TensorId>,
    outputs: Vec<TensorId>,
    /// Whether the lists hold a placed graph.
    recorded: bool,
    /// The context's revision after the scheduler's last change to it;
    /// `None` when there is no placement to reuse.
    revision: Option<u64>,
}

impl PlacedGraph {
    /// Whether `graph` has exactly the lists last placed.
    pub fn is_same_graph(&self, graph: Graph<'_>) -> bool {
        self.nodes == graph.nodes() && self.leafs == graph.leafs() && self.outputs == graph.outputs()
    }

    /// Whether the current placement holds for `graph` as it is in `ctx`:
    /// same lists, and nothing in the context changed since it was recorded.
    pub fn holds_for(&self, ctx: &Context, graph: Graph<'_>) -> bool {
        self.revision == Some(ctx.revision()) && self.is_same_graph(graph)
    }

    /// Records `graph` as placed; call [`PlacedGraph::stamp`] once the
    /// scheduler is done changing the context. Keeps the lists' capacity.
    pub fn record(&mut self, graph: Graph<'_>) {
        for (mine, theirs) in
            [(&mut self.nodes, graph.nodes()), (&mut self.leafs, graph.leafs()), (&mut self.outputs, graph.outputs())]
        {
            mine.clear();
            mine.extend_from_slice(theirs);
        }
        self.recorded = true;
        self.revision = None;
    }

    /// Notes the context's revision after the scheduler's own changes (a
    /// no-op when nothing is recorded).
    pub fn stamp(&mut self, ctx: &Context) {
        if self.recorded {
            self.revision = Some(ctx.revision());
        }
    }

    /// Forgets the placement: the next graph is placed from scratch.
    pub fn forget(&mut self) {
        self.nodes.clear();
        self.leafs.clear();
        self.outputs.clear();
        self.recorded = false;
        self.revision = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::testing::TestBufferType;
    use crate::{BufferType, BufferUsage, DType, GraphArena};

    #[test]
    fn holds_until_the_graph_or_the_context_changes() {
        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, [8]).unwrap();
        ctx.set_input(x).unwrap();
        let buft: Arc<dyn BufferType> = TestBufferType::host("host", 32).shared();
        let buffer = ctx.alloc_buffer(&buft, 64, BufferUsage::Compute).unwrap();
        ctx.place(x, buffer, 0).unwrap();
        let y = ctx.silu(x).unwrap();
        let z = ctx.neg(y).unwrap();
        let arena = GraphArena::new();
        let g = ctx.build_graph(&arena, &[z]).unwrap();

        let mut placed = PlacedGraph::default();
        assert!(!placed.holds_for(&ctx, g), "nothing recorded");
        placed.record(g);
        assert!(!placed.holds_for(&ctx, g), "recorded but not stamped");
        placed.stamp(&ctx);
        assert!(placed.holds_for(&ctx, g));

        let arena2 = GraphArena::new();
        let shorter = ctx.build_graph(&arena2, &[y]).unwrap();
        assert!(!placed.holds_for(&ctx, shorter), "other lists");

        ctx.set_f32(x, &[1.0; 8]).unwrap();
        assert!(placed.holds_for(&ctx, g), "writing data changes nothing placement reads");
        ctx.set_name(y, "y").unwrap();
        assert!(!placed.holds_for(&ctx, g), "a description changed");
        placed.stamp(&ctx);
        assert!(placed.holds_for(&ctx, g));

        placed.forget();
        placed.stamp(&ctx);
        assert!(!placed.holds_for(&ctx, g), "forgotten, and stamping alone does not bring it back");
    }
}
