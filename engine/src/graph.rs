//! Compute graphs: topologically ordered node and leaf lists in an arena.

use std::ops::Range;

use gantry_arenas::keys::slot_index;
use gantry_arenas::{BitSet, GraphArena, TensorId};

use crate::sched::optimize::FusedGroup;
use crate::{Context, Error, Op, Result};

/// A topologically ordered graph: `nodes` are computed tensors (every source
/// before its consumers), `leafs` the inputs, weights and constants they read.
/// The lists live in a [`GraphArena`]; the graph borrows it, so the arena
/// cannot be reset while the graph is in use.
///
/// ```
/// use gantry_arenas::GraphArena;
/// use gantry_engine::{Context, DType};
/// let mut ctx = Context::new();
/// let x = ctx.tensor(DType::F32, [8])?;
/// let y = ctx.silu(x)?;
/// let z = ctx.add(y, x)?;
/// let arena = GraphArena::new();
/// let graph = ctx.build_graph(&arena, &[z])?;
/// assert_eq!(graph.nodes(), &[y, z]);
/// assert_eq!(graph.leafs(), &[x]);
/// # Ok::<(), gantry_engine::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Graph<'a> {
    nodes: &'a [TensorId],
    leafs: &'a [TensorId],
    outputs: &'a [TensorId],
    fused: &'a [FusedGroup],
}

impl<'a> Graph<'a> {
    /// A graph over node and leaf lists built elsewhere (the caller keeps the
    /// topological order).
    pub fn from_parts(nodes: &'a [TensorId], leafs: &'a [TensorId], outputs: &'a [TensorId]) -> Self {
        Self { nodes, leafs, outputs, fused: &[] }
    }

    /// The same graph with `fused`, the runs of adjacent nodes its backend
    /// may compute as one (the scheduler's optimize system marks them,
    /// sorted by position: see [`crate::sched::optimize`]).
    pub fn with_fused(self, fused: &'a [FusedGroup]) -> Self {
        Self { fused, ..self }
    }

    /// The fused groups (none unless the scheduler's optimize system made
    /// some for this split's backend).
    pub fn fused(&self) -> &'a [FusedGroup] {
        self.fused
    }

    /// Computed tensors in topological order.
    pub fn nodes(&self) -> &'a [TensorId] {
        self.nodes
    }

    /// Leafs: tensors read by the nodes and computed by nothing.
    pub fn leafs(&self) -> &'a [TensorId] {
        self.leafs
    }

    /// The tensors the graph was built to compute.
    pub fn outputs(&self) -> &'a [TensorId] {
        self.outputs
    }

    /// Number of nodes.
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes in `range`, as a graph of their own (no leafs, no outputs;
    /// ggml's `ggml_graph_view`). `None` when the range is out of bounds.
    pub fn view(&self, range: Range<usize>) -> Option<Graph<'a>> {
        Some(Graph { nodes: self.nodes.get(range)?, leafs: &[], outputs: &[], fused: &[] })
    }
}

impl Context {
    /// Builds the graph computing `outputs`: every tensor they depend on
    /// through sources and view sources, sources before consumers (sources
    /// in order, depth first, as ggml's `ggml_build_forward_expand`).
    /// Tensors that no output depends on are not in the graph.
    ///
    /// All lists and scratch come from `arena`; after a reset, building the
    /// same graph again allocates nothing.
    pub fn build_graph<'a>(&self, arena: &'a GraphArena, outputs: &[TensorId]) -> Result<Graph<'a>> {
        let visited_words = arena.alloc_slice_fill(BitSet::words_for(self.slot_capacity() + 1), 0u64);
        let mut visited = BitSet::new(visited_words);
        let mut nodes = arena.vec_with_capacity(64);
        let mut leafs = arena.vec_with_capacity(16);
        // Explicit stack of (tensor, next source slot) so deep graphs cannot
        // overflow the call stack.
        let mut stack: bumpalo::collections::Vec<'_, (TensorId, u8)> = arena.vec_with_capacity(64);
        for &out in outputs {
            self.desc(out)?;
            if !visited.insert(slot_index(out)) {
                continue;
            }
            stack.push((out, 0));
            while let Some(top) = stack.last_mut() {
                let (t, next) = *top;
                let desc = self.desc(t)?;
                match next_parent(desc, next) {
                    Some((parent, after)) => {
                        top.1 = after;
                        if self.get(parent).is_none() {
                            return Err(Error::InvalidTensor {
                                tensor: self.describe(t),
                                reason: format!("reads removed tensor {parent:?}"),
                            });
                        }
                        if visited.insert(slot_index(parent)) {
                            stack.push((parent, 0));
                        }
                    }
                    None => {
                        stack.pop();
                        if desc.op == Op::None { leafs.push(t) } else { nodes.push(t) }
                    }
                }
            }
        }
        let outputs = arena.alloc_slice_copy(outputs);
        Ok(Graph { nodes: nodes.into_bump_slice(), leafs: leafs.into_bump_slice(), outputs, fused: &[] })
    }
}

/// The parent to visit at cursor `next` (sources in order, then the view
/// source when it is not also a source), with the cursor after it.
fn next_parent(desc: &crate::TensorDesc, mut next: u8) -> Option<(TensorId, u8)> {
    while (next as usize) < desc.srcs.len() {
        let i = next as usize;
        next += 1;
        if let Some(s) = desc.srcs[i] {
            return Some((s, next));
        }
    }
    if next as usize == desc.srcs.len()
        && let Some(v) = desc.view_src
        && !desc.srcs.contains(&Some(v))
    {
        return Some((v, next + 1));
    }
    None
}
