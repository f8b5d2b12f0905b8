//! The split system: cut the node list into splits, one backend each,
//! create the input copies and rewrite sources to read them. The graph the
//! alloc system plans is laid out from these tables by
//! [`super::alloc::build_alloc_graph`].

use std::ops::Range;

use gantry_arenas::TensorId;

use super::optimize::OptimizedNodes;
use super::tables::{Assignments, CopyTable, Prealloc};
use super::{BackendIndex, BackendSet};
use crate::alloc::TensorTable;
use crate::alloc::tensor_table::{NONE, flag, kind};
use crate::{BufferUsage, Context, MAX_SRC, Name, Op, Result, TensorDesc, TensorFlags};

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

/// One copy the split system made, with the backend whose memory it is in.
#[derive(Debug, Clone, Copy)]
pub(super) struct MadeCopy {
    pub(super) copy: TensorId,
    pub(super) backend: BackendIndex,
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
    /// The copies made this run, in order, with their backends.
    pub(super) made: Vec<MadeCopy>,
    /// Per gathered entry: the backends that can read its memory where it
    /// lives (placement is final when splitting starts).
    readable: Vec<u16>,
    /// The optimize system's run order and fused groups.
    pub optimized: OptimizedNodes,
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
        self.made.clear();
        self.optimized.clear();
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

/// What the split system reads: the placement the assign and expand
/// systems made of the gathered graph.
#[derive(Clone, Copy)]
pub struct SplitInputs<'a> {
    /// The backends.
    pub set: &'a BackendSet,
    /// The gathered graph.
    pub table: &'a TensorTable,
    /// The pre-allocated buffers it reads.
    pub pre: &'a Prealloc,
    /// Backend per entry (every node and source assigned).
    pub assigned: &'a Assignments,
    /// Pipeline copies and the input limit.
    pub params: SplitParams,
}

/// Cuts the gathered graph into splits. A new split starts where the backend changes,
/// where a node reads weights on another backend that this one cannot read
/// (so the memory of previously offloaded weights can be reused), and where
/// the split's copied inputs would pass `max_inputs`. Each source living where
/// the split's backend cannot read it gets one copy per (tensor, backend,
/// pipeline copy), shared by later splits on the same backend; the node's
/// source is rewritten to the copy.
pub fn split_graph(
    ctx: &mut Context,
    inputs: SplitInputs<'_>,
    copies: &mut CopyTable,
    out: &mut SplitTables,
) -> Result<()> {
    let SplitInputs { set, table, pre, assigned, params } = inputs;
    let prealloc = |d: usize| pre.get(table, d);
    let backend_of = |d: usize| assigned.get(d).unwrap_or(set.cpu());
    // `expand::buffer_supported` for every backend at once: memory decides,
    // not assignment (a view, even one computed in place, lives where its
    // view source does).
    let mut readable = std::mem::take(&mut out.readable);
    readable.clear();
    readable.extend(table.memory_owners().map(|(owner, external)| match pre.buffer(external) {
        Some(buffer) => buffer.readable,
        None => assigned.get(owner).map_or(0, |mem| set.usable_by(mem)),
    }));
    let reads = |b: BackendIndex, d: usize| readable[d] & b.bit() != 0;
    // Whether every source slot of `srcs` holds memory `b` can read (`NONE`
    // is no entry: nothing to read).
    let reads_all = |b: BackendIndex, srcs: &[u32; MAX_SRC]| {
        let all = srcs.iter().fold(u16::MAX, |m, &s| m & readable.get(s as usize).copied().unwrap_or(u16::MAX));
        all & b.bit() != 0
    };
    let node_dense = table.node_dense.as_slice();
    let first_backend = node_dense
        .iter()
        .map(|&d| d as usize)
        .find(|&d| table.kind(d) & kind::VIEW_OP == 0)
        .map_or(set.cpu(), backend_of);
    let mut split = Split { backend: first_backend, nodes: 0..0, inputs: 0..0 };
    let graph_input_copies = params.n_copies > 1;
    for (i, &nd) in node_dense.iter().enumerate() {
        let nd = nd as usize;
        let op_kind = table.kind(nd);
        if op_kind & kind::VIEW_OP != 0 {
            continue;
        }
        let srcs = table.srcs(nd);
        let node_backend = backend_of(nd);
        let reads_all_here = reads_all(split.backend, &srcs);
        // Most nodes: same backend, every source readable where it is, no
        // pipeline copies to make — nothing to cut, copy or rewrite.
        if node_backend == split.backend && reads_all_here && !graph_input_copies {
            record_write_in_place(table, nd, op_kind, copies);
            continue;
        }
        let node = table.tensor(nd);
        let n_inputs = out.inputs.len() - split.inputs.start;
        let mut new_split = node_backend != split.backend;
        // A source the split's backend reads where it is needs no copy and
        // cannot be weights it cannot read: only other sources are looked at.
        if !new_split && n_inputs > 0 && !reads_all_here {
            let mut needed = 0;
            for (j, &src) in srcs.iter().enumerate() {
                if src == NONE {
                    continue;
                }
                let src = src as usize;
                if let Some(buffer) = prealloc(src)
                    && buffer.usage == BufferUsage::Weights
                    && assigned.get(src) != Some(split.backend)
                    && !buffer.readable_by(split.backend)
                {
                    new_split = true;
                    break;
                }
                let already = srcs[..j].contains(&(src as u32));
                let owner = table.tensor(table.memory_owner(src));
                if !already
                    && !reads(split.backend, src)
                    && copies.get_current(table.tensor(src), owner, split.backend, 0).is_none()
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
        for (j, &src) in srcs.iter().enumerate() {
            if src == NONE {
                continue;
            }
            let src = src as usize;
            let src_t = table.tensor(src);
            if graph_input_copies
                && table.flags(src) & (flag::INPUT | flag::VIEW) == flag::INPUT
                && copies.get(src_t, backend_of(src), 0).is_none()
            {
                let src_backend = backend_of(src);
                for c in 0..params.n_copies {
                    // The input itself is copy 0; the others hold memory for the
                    // runs in flight (the scheduler rotates placements, see
                    // `sched::alloc::PipelineRotation`).
                    let copy = if c == 0 {
                        src_t
                    } else {
                        let copy = make_copy(ctx, src_t, set.backend(src_backend).name(), c, true, &mut out.created)?;
                        out.made.push(MadeCopy { copy, backend: src_backend });
                        copy
                    };
                    copies.set(src_t, src_t, src_backend, c, copy);
                }
                out.graph_inputs.push(src_t);
            }
            if !reads(cur, src) {
                // One copy per (tensor, backend), shared by later splits on
                // that backend until the tensor's memory is written again.
                let owner = table.tensor(table.memory_owner(src));
                let copy = match copies.get_current(src_t, owner, cur, 0) {
                    Some(copy) => copy,
                    None => {
                        for c in 0..params.n_copies {
                            let pinned = params.n_copies > 1;
                            let copy = make_copy(ctx, src_t, set.backend(cur).name(), c, pinned, &mut out.created)?;
                            out.made.push(MadeCopy { copy, backend: cur });
                            copies.set(src_t, owner, cur, c, copy);
                            out.input_copies.push(copy);
                        }
                        out.inputs.push(src_t);
                        out.input_copies[out.input_copies.len() - params.n_copies]
                    }
                };
                ctx.desc_mut_untracked(node)?.srcs[j] = Some(copy);
                out.rewrites.push(SrcRewrite { node, slot: j as u8, original: src_t, copy });
                out.applied = true;
            }
        }
        record_write_in_place(table, nd, op_kind, copies);
    }
    split.nodes.end = node_dense.len();
    split.inputs.end = out.inputs.len();
    if !node_dense.is_empty() {
        out.splits.push(split);
    }
    out.readable = readable;
    Ok(())
}

/// A node computed in place (or a CPY / SET_ROWS into a cache) writes its
/// view source's memory: copies of that memory made before now are stale
/// for later splits.
#[inline(always)]
fn record_write_in_place(table: &TensorTable, nd: usize, op_kind: u8, copies: &mut CopyTable) {
    let root = table.root(nd);
    if root != NONE && op_kind & kind::COMPUTES != 0 {
        copies.record_write(table.tensor(root as usize));
    }
}

/// The pipeline copy numbers as names spell them (`CPU#x#0` ... `CPU#x#7`).
const COPY_NUMBERS: [&str; super::MAX_COPIES] = ["0", "1", "2", "3", "4", "5", "6", "7"];

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
        srcs: [None; MAX_SRC],
        view_src: None,
        view_offset: 0,
        flags,
        name: Name::concat(&[backend_name, "#", ctx.name(src), "#", COPY_NUMBERS[copy % COPY_NUMBERS.len()]]),
        ..*src_desc
    };
    let t = ctx.insert_scratch(desc);
    created.push(t);
    Ok(t)
}
