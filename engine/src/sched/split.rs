//! The split system: cut the node list into splits, one backend each,
//! create the input copies, rewrite sources to read them, and lay out the
//! graph the alloc system plans.

use std::ops::Range;

use gantry_arenas::TensorId;

use super::backend_set::is_view_op;
use super::expand::buffer_supported;
use super::tables::{Assignments, CopyTable, Prealloc};
use super::{BackendIndex, BackendSet};
use crate::alloc::BufferTypeIndex;
use crate::{BufferUsage, Context, Graph, Name, Op, Result, TensorDesc, TensorFlags};

/// A run of consecutive nodes computed by one backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The backend.
    pub backend: BackendIndex,
    /// Positions in the graph's node list.
    pub nodes: Range<usize>,
    /// Positions in [`SplitTables::inputs`] of the tensors copied in before the split runs.
    pub inputs: Range<usize>,
}

/// One rewritten source, to undo at reset.
#[derive(Debug, Clone, Copy)]
pub struct SrcRewrite {
    /// The node whose source changed.
    pub node: TensorId,
    /// Which source slot.
    pub slot: u8,
    /// What it read before.
    pub original: TensorId,
    /// The copy it reads while the scheduler runs the graph.
    pub copy: TensorId,
}

/// Everything the split system produces. Every list keeps its capacity between runs.
#[derive(Debug, Default)]
pub struct SplitTables {
    /// The splits, in order.
    pub splits: Vec<Split>,
    /// Split inputs (original tensors), in split order.
    pub inputs: Vec<TensorId>,
    /// The copies of each split input, `n_copies` per input (pipeline copy
    /// `c` of input `k` at `k * n_copies + c`): the split's nodes read copy 0.
    pub input_copies: Vec<TensorId>,
    /// Graph inputs given pipeline copies (`n_copies > 1`).
    pub graph_inputs: Vec<TensorId>,
    /// Tensors the scheduler created in the context this run (removed at reset).
    pub created: Vec<TensorId>,
    /// Sources rewritten to read copies. They are applied only while the
    /// scheduler allocates or computes, so the user's graph is unchanged
    /// between calls (and can be rebuilt or inspected).
    pub rewrites: Vec<SrcRewrite>,
    /// Whether `rewrites` are applied to the context now.
    pub applied: bool,
    /// The allocator's view of the graph: split input copies interleaved with the nodes.
    pub alloc_nodes: Vec<TensorId>,
    /// The allocator's buffer type per allocator node.
    pub alloc_node_buft: Vec<BufferTypeIndex>,
    /// The allocator's leafs: pipeline copies first, then the graph's leafs.
    pub alloc_leafs: Vec<TensorId>,
    /// The allocator's buffer type per allocator leaf.
    pub alloc_leaf_buft: Vec<BufferTypeIndex>,
}

impl SplitTables {
    /// Points the rewritten sources at their copies.
    pub fn apply(&mut self, ctx: &mut Context) {
        if !self.applied {
            for r in &self.rewrites {
                if let Ok(d) = ctx.desc_mut_untracked(r.node) {
                    d.srcs[r.slot as usize] = Some(r.copy);
                }
            }
            self.applied = true;
        }
    }

    /// Points the rewritten sources back at their originals.
    pub fn unapply(&mut self, ctx: &mut Context) {
        if self.applied {
            for r in self.rewrites.iter().rev() {
                if let Ok(d) = ctx.desc_mut_untracked(r.node) {
                    d.srcs[r.slot as usize] = Some(r.original);
                }
            }
            self.applied = false;
        }
    }

    /// Undoes this run's rewrites and removes its copies from `ctx`.
    /// (Pointing sources at copies and back is not counted as a change of
    /// the context: it is always undone before the scheduler returns.)
    pub fn undo(&mut self, ctx: &mut Context) {
        self.unapply(ctx);
        self.rewrites.clear();
        for t in self.created.drain(..) {
            let _ = ctx.remove(t);
        }
        self.splits.clear();
        self.inputs.clear();
        self.input_copies.clear();
        self.graph_inputs.clear();
        self.alloc_nodes.clear();
        self.alloc_node_buft.clear();
        self.alloc_leafs.clear();
        self.alloc_leaf_buft.clear();
    }
}

/// Parameters of the split system.
#[derive(Debug, Clone, Copy)]
pub struct SplitParams {
    /// Pipeline copies (1 = off).
    pub n_copies: usize,
    /// The pipeline copy this run uses (its memory, not its tensor: the
    /// graph always reads copy 0, placed over copy `cur_copy`'s memory).
    pub cur_copy: usize,
    /// Most inputs one split copies in before a new split is started.
    pub max_inputs: usize,
}

/// What the split system reads besides the context and the graph.
#[derive(Clone, Copy)]
pub struct SplitInputs<'a> {
    /// The backends.
    pub set: &'a BackendSet,
    /// Pre-allocated buffer per tensor.
    pub pre: &'a Prealloc,
    /// Backend per tensor (every node and source assigned).
    pub assigned: &'a Assignments,
    /// Pipeline copies and the input limit.
    pub params: SplitParams,
}

/// Cuts `graph` into splits. A new split starts where the backend changes,
/// where a node reads weights on another backend that this one cannot read
/// (so the memory of previously offloaded weights can be reused), and where
/// the split's copied inputs would pass `max_inputs`. Each source living where
/// the split's backend cannot read it gets one copy per (tensor, backend,
/// pipeline copy), shared by later splits on the same backend; the node's
/// source is rewritten to the copy.
pub fn split_graph(
    ctx: &mut Context,
    graph: Graph<'_>,
    inputs: SplitInputs<'_>,
    copies: &mut CopyTable,
    out: &mut SplitTables,
) -> Result<()> {
    let SplitInputs { set, pre, assigned, params } = inputs;
    let nodes = graph.nodes();
    let first_backend = nodes
        .iter()
        .find(|&&n| ctx.get(n).is_some_and(|d| !is_view_op(&d.op)))
        .and_then(|&n| assigned.get(n))
        .unwrap_or(set.cpu());
    let mut split = Split { backend: first_backend, nodes: 0..0, inputs: 0..0 };
    for (i, &node) in nodes.iter().enumerate() {
        let (srcs, view_op, writes_into) = {
            let d = ctx.desc(node)?;
            (d.srcs, is_view_op(&d.op), d.view_src.filter(|_| !d.op.is_empty()))
        };
        if view_op {
            continue;
        }
        let node_backend = assigned.get(node).unwrap_or(set.cpu());
        let n_inputs = out.inputs.len() - split.inputs.start;
        let mut new_split = node_backend != split.backend;
        if !new_split && n_inputs > 0 {
            let mut needed = 0;
            for (j, src) in srcs.iter().enumerate() {
                let Some(src) = *src else { continue };
                if let Some(buffer) = pre.get(src)
                    && buffer.usage == BufferUsage::Weights
                    && assigned.get(src) != Some(split.backend)
                    && !buffer.readable_by(split.backend)
                {
                    new_split = true;
                    break;
                }
                let already = srcs[..j].contains(&Some(src));
                if !already
                    && needs_copy(ctx, src, split.backend, set, pre, assigned)
                    && copies.get_current(src, memory_owner(ctx, src), split.backend, 0).is_none()
                {
                    needed += 1;
                }
            }
            new_split |= n_inputs + needed > params.max_inputs;
        }
        if new_split && i > 0 {
            split.nodes.end = i;
            split.inputs.end = out.inputs.len();
            out.splits.push(split);
            split = Split { backend: node_backend, nodes: i..i, inputs: out.inputs.len()..out.inputs.len() };
        } else if new_split {
            split.backend = node_backend;
        }
        let cur = split.backend;
        for (j, src) in srcs.iter().enumerate() {
            let Some(src) = *src else { continue };
            let src_backend = assigned.get(src).unwrap_or(set.cpu());
            if params.n_copies > 1
                && ctx.desc(src).is_ok_and(|d| d.flags.contains(TensorFlags::INPUT) && d.view_src.is_none())
                && copies.get(src, src_backend, 0).is_none()
            {
                for c in 0..params.n_copies {
                    // The input itself is copy 0; the others hold memory for the
                    // runs in flight (the scheduler rotates placements, see
                    // `Scheduler::rotate_pipeline_copies`).
                    let copy = if c == 0 {
                        src
                    } else {
                        make_copy(ctx, src, set.backend(src_backend).name(), c, true, &mut out.created)?
                    };
                    copies.set(src, src, src_backend, c, copy);
                }
                out.graph_inputs.push(src);
            }
            // Memory decides, not assignment: a view (even one computed in place)
            // lives where its view source does.
            if !buffer_supported(ctx, src, cur, set, pre, assigned) {
                // One copy per (tensor, backend), shared by later splits on
                // that backend until the tensor's memory is written again.
                let owner = memory_owner(ctx, src);
                let copy = match copies.get_current(src, owner, cur, 0) {
                    Some(copy) => copy,
                    None => {
                        for c in 0..params.n_copies {
                            let pinned = params.n_copies > 1;
                            let copy = make_copy(ctx, src, set.backend(cur).name(), c, pinned, &mut out.created)?;
                            copies.set(src, owner, cur, c, copy);
                            out.input_copies.push(copy);
                        }
                        out.inputs.push(src);
                        out.input_copies[out.input_copies.len() - params.n_copies]
                    }
                };
                ctx.desc_mut_untracked(node)?.srcs[j] = Some(copy);
                out.rewrites.push(SrcRewrite { node, slot: j as u8, original: src, copy });
                out.applied = true;
            }
        }
        if let Some(root) = writes_into {
            // Computed in place (or CPY / SET_ROWS into a cache): copies of
            // this memory made before now are stale for later splits.
            copies.record_write(root);
        }
    }
    split.nodes.end = nodes.len();
    split.inputs.end = out.inputs.len();
    if !nodes.is_empty() {
        out.splits.push(split);
    }
    build_alloc_graph(ctx, graph, inputs, copies, out)
}

/// The tensor owning `t`'s memory: its view source, or itself.
#[inline]
fn memory_owner(ctx: &Context, t: TensorId) -> TensorId {
    ctx.get(t).and_then(|d| d.view_src).unwrap_or(t)
}

fn needs_copy(
    ctx: &Context,
    src: TensorId,
    backend: BackendIndex,
    set: &BackendSet,
    pre: &Prealloc,
    assigned: &Assignments,
) -> bool {
    !buffer_supported(ctx, src, backend, set, pre, assigned)
}

/// A tensor with `src`'s dtype, shape and strides, computed by nothing.
fn make_copy(
    ctx: &mut Context,
    src: TensorId,
    backend_name: &str,
    copy: usize,
    pinned: bool,
    created: &mut Vec<TensorId>,
) -> Result<TensorId> {
    let src_desc = ctx.desc(src)?;
    let flags = if pinned { TensorFlags::INPUT.with(TensorFlags::OUTPUT) } else { TensorFlags::NONE };
    let desc = TensorDesc {
        op: Op::None,
        srcs: [None; crate::MAX_SRC],
        view_src: None,
        view_offset: 0,
        flags,
        name: Name::from_fmt(format_args!("{}#{}#{}", backend_name, ctx.name(src), copy)),
        ..*src_desc
    };
    let t = ctx.insert_scratch(desc);
    created.push(t);
    Ok(t)
}

/// Lays out the allocator's graph: for each split, its input copies (each
/// after a view of its source, which keeps the source alive until the copy
/// is made) and then its nodes; the leafs are the pipeline copies (allocated
/// first, never freed) and then the graph's leafs.
fn build_alloc_graph(
    ctx: &mut Context,
    graph: Graph<'_>,
    inputs: SplitInputs<'_>,
    copies: &CopyTable,
    out: &mut SplitTables,
) -> Result<()> {
    let SplitInputs { set, assigned, params, .. } = inputs;
    let buft_of = |t: TensorId| set.alloc_buft(assigned.get(t).unwrap_or(set.cpu()));
    for s in 0..out.splits.len() {
        let (backend, inputs, nodes) = {
            let sp = &out.splits[s];
            (sp.backend, sp.inputs.clone(), sp.nodes.clone())
        };
        for k in inputs {
            let input = out.inputs[k];
            let copy = out.input_copies[k * params.n_copies];
            let d = *ctx.desc(input)?;
            // Op NONE with a view source: a dependency marker (ggml-alloc's
            // convention), counted as a consumer of `input`, never as a view.
            let dep = ctx.insert_scratch(TensorDesc {
                op: Op::None,
                srcs: [Some(input), None, None, None],
                view_src: Some(d.view_src.unwrap_or(input)),
                view_offset: if d.view_src.is_some() { d.view_offset } else { 0 },
                flags: TensorFlags::NONE,
                name: Name::EMPTY,
                ..d
            });
            out.created.push(dep);
            out.alloc_nodes.push(dep);
            out.alloc_node_buft.push(buft_of(input));
            out.alloc_nodes.push(copy);
            out.alloc_node_buft.push(set.alloc_buft(backend));
        }
        for &n in &graph.nodes()[nodes] {
            out.alloc_nodes.push(n);
            out.alloc_node_buft.push(buft_of(n));
        }
    }
    if params.n_copies > 1 {
        for &input in &out.graph_inputs {
            let b = assigned.get(input).unwrap_or(set.cpu());
            for c in 0..params.n_copies {
                out.alloc_leafs.push(copies.get(input, b, c).unwrap_or(input));
                out.alloc_leaf_buft.push(set.alloc_buft(b));
            }
        }
        for sp in &out.splits {
            for k in sp.inputs.clone() {
                for c in 0..params.n_copies {
                    out.alloc_leafs.push(out.input_copies[k * params.n_copies + c]);
                    out.alloc_leaf_buft.push(set.alloc_buft(sp.backend));
                }
            }
        }
    }
    for &leaf in graph.leafs() {
        out.alloc_leafs.push(leaf);
        out.alloc_leaf_buft.push(buft_of(leaf));
    }
    Ok(())
}
