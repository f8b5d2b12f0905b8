//! The optimize system (ggml's `graph_optimize`): between split and alloc,
//! each backend may rewrite its splits. It may move a node earlier within
//! its split (so that nodes it computes together are adjacent), mark runs of
//! adjacent nodes as fused groups it computes as one, and add
//! allocation-order edges so the allocator keeps alive, until a fused group
//! has run, every tensor the group still reads.
//!
//! Gantry invents no new ops: a fused group is a run of ordinary nodes that
//! the backend computes in one pass. Every node of a group keeps its result
//! tensor; an intermediate the group does not write must have no reader
//! outside it (a backend asks [`SplitRewrite::sole_reader`] before fusing).
//! The groups reach the backend with each split's graph
//! ([`Graph::fused`]); a backend that ignores them computes the nodes one by
//! one, which is always correct.
//!
//! [`super::SchedulerParams::graph_optimize`] `false` (`GANTRY_NO_FUSION=1`
//! through [`super::SchedulerParams::from_env`]) turns the system off: the
//! nodes run in the graph's order, unfused.

use std::ops::Range;

use gantry_arenas::TensorId;

use super::BackendSet;
use super::split::SplitTables;
use crate::alloc::TensorTable;
use crate::alloc::tensor_table::{NONE, flag, kind};
use crate::{Context, Error, Graph, MAX_SRC, Result};

/// What a fused group computes in one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FusionKind {
    /// RMS_NORM followed by a MUL that is the norm's only reader: normalized
    /// and scaled in one pass; the norm's own result is not written.
    RmsNormMul,
    /// Matrix products reading the same activation (src1): it is converted
    /// once for the group and the products run in one dispatch. Every
    /// product writes its result.
    SharedActivation,
    /// ROPE, the reshape of its result into rows, and the SET_ROWS that
    /// stores them (a decoder's keys into its KV cache): rotated straight
    /// into the destination rows; the rotated tensor is not written.
    RopeSetRows,
}

impl FusionKind {
    /// The name `GANTRY_SCHED_DEBUG` and the dot picture show.
    pub fn name(self) -> &'static str {
        match self {
            FusionKind::RmsNormMul => "RMS_NORM+MUL",
            FusionKind::SharedActivation => "MUL_MAT×shared-src1",
            FusionKind::RopeSetRows => "ROPE+SET_ROWS",
        }
    }
}

/// Most nodes in one fused group.
pub const MAX_FUSED: usize = 4;

/// A run of adjacent nodes of a split's graph that its backend computes as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FusedGroup {
    /// Position of the group's first node in the graph's node list.
    pub start: u32,
    /// Nodes in the group (2 to [`MAX_FUSED`]).
    pub len: u32,
    /// What the group computes.
    pub kind: FusionKind,
}

impl FusedGroup {
    /// The group's positions in the graph's node list.
    pub fn range(&self) -> Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

/// Reads `GANTRY_NO_FUSION`: fusion is on unless it is set to something
/// other than empty or `0`. Called by [`super::SchedulerParams::from_env`]
/// only.
pub fn fusion_from_env() -> bool {
    fusion_enabled(std::env::var("GANTRY_NO_FUSION").ok().as_deref())
}

/// Whether fusion is on for a `GANTRY_NO_FUSION` value.
pub fn fusion_enabled(no_fusion: Option<&str>) -> bool {
    no_fusion.is_none_or(|v| matches!(v.trim(), "" | "0"))
}

/// The optimize system's results, kept with the placement (every list keeps
/// its capacity between placements).
#[derive(Debug, Default)]
pub struct OptimizedNodes {
    /// The graph's nodes in the order they run: split by split, each split's
    /// nodes at its [`super::Split::nodes`] positions, possibly reordered.
    pub nodes: Vec<TensorId>,
    /// The gathered-table entry of each of `nodes`.
    pub(crate) dense: Vec<u32>,
    /// Every split's fused groups, positions relative to its first node.
    pub groups: Vec<FusedGroup>,
    /// Per split: its groups' positions in `groups`.
    pub split_groups: Vec<Range<usize>>,
    /// Who reads each gathered entry, counted once a backend asks.
    readers: ReaderCounts,
}

/// Who reads each entry of the gathered graph, as it was placed (before any
/// backend added allocation-order edges). Counted when a backend first asks
/// ([`SplitRewrite::sole_reader`]) or first adds an edge
/// ([`SplitRewrite::keep_alive`]): backends that rewrite nothing cost nothing.
#[derive(Debug, Default)]
struct ReaderCounts {
    /// Whether the columns hold this placement's counts.
    counted: bool,
    /// Per gathered entry: how many nodes read it (as a source or view).
    readers: Vec<u32>,
    /// Per gathered entry: the last node reading it.
    last_reader: Vec<u32>,
}

impl OptimizedNodes {
    /// Forgets the placement's results.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.dense.clear();
        self.groups.clear();
        self.split_groups.clear();
    }

    /// Split `s`'s nodes in the order they run.
    pub fn split_nodes(&self, tables: &SplitTables, s: usize) -> &[TensorId] {
        tables.splits.get(s).and_then(|sp| self.nodes.get(sp.nodes.clone())).unwrap_or(&[])
    }

    /// Split `s`'s fused groups (positions relative to its first node).
    pub fn split_fused(&self, s: usize) -> &[FusedGroup] {
        self.split_groups.get(s).and_then(|r| self.groups.get(r.clone())).unwrap_or(&[])
    }

    /// Split `s`'s graph as its backend computes it: its nodes and groups.
    pub fn split_graph(&self, tables: &SplitTables, s: usize) -> Graph<'_> {
        Graph::from_parts(self.split_nodes(tables, s), &[], &[]).with_fused(self.split_fused(s))
    }

    /// The group node `t` (at position `i` of split `s`) belongs to, if any.
    pub fn group_of(&self, s: usize, i: usize) -> Option<FusedGroup> {
        self.split_fused(s).iter().copied().find(|g| g.range().contains(&i))
    }
}

/// One split as its backend sees it in [`crate::Backend::graph_optimize`]:
/// its nodes in their current order, what reads them, and the rewrites the
/// backend may make.
pub struct SplitRewrite<'a> {
    table: &'a mut TensorTable,
    nodes: &'a mut [TensorId],
    dense: &'a mut [u32],
    readers: &'a mut ReaderCounts,
    groups: &'a mut Vec<FusedGroup>,
    first_group: usize,
}

impl SplitRewrite<'_> {
    /// The split's nodes in their current order.
    pub fn nodes(&self) -> &[TensorId] {
        self.nodes
    }

    /// The node reading `t` when exactly one node of the whole graph reads
    /// it (as a source or a view), that node is in this split, and `t` is
    /// no graph input or output: then a fused group containing both may
    /// leave `t` unwritten. `t` may be a view (a reshape between fused
    /// nodes): then its source's memory goes unwritten, so the source must
    /// have this view as its sole reader too.
    pub fn sole_reader(&mut self, t: TensorId) -> Option<TensorId> {
        self.count_readers();
        let d = self.table.lookup(t)? as usize;
        let counts = &*self.readers;
        if self.table.flags(d) & (flag::PROTECTED | flag::EXTERNAL) != 0 || counts.readers.get(d) != Some(&1) {
            return None;
        }
        let reader = *counts.last_reader.get(d)?;
        self.dense.iter().position(|&e| e == reader).map(|i| self.nodes[i])
    }

    /// Counts the readers of every entry, once per placement, before any
    /// allocation-order edge is added.
    fn count_readers(&mut self) {
        if !self.readers.counted {
            count_readers(self.table, self.readers);
        }
    }

    fn dense_at(&self, i: usize) -> usize {
        self.dense[i] as usize
    }

    /// Whether entry `n` writes memory it does not own (computed in place
    /// over a view, or a SET_ROWS / CPY into a cache): such a node's memory
    /// order matters, so it is never moved, nor moved across.
    fn writes_root(&self, n: usize) -> Option<usize> {
        let root = self.table.root(n);
        (root != NONE && self.table.kind(n) & kind::COMPUTES != 0).then_some(root as usize)
    }

    /// Moves the node at position `from` to position `to + 1` (just after
    /// the node at `to`), shifting the nodes between one later. Refused
    /// (`false`, nothing changes) unless it keeps every dependency: the
    /// node writes only its own memory, reads nothing computed between,
    /// and no node between writes memory it reads.
    pub fn hoist(&mut self, from: usize, to: usize) -> bool {
        if to >= from || from >= self.nodes.len() {
            return from == to + 1;
        }
        let moved = self.dense_at(from);
        if self.writes_root(moved).is_some() {
            return false;
        }
        let srcs = self.table.srcs(moved);
        let mem = |s: u32| if s == NONE { NONE } else { self.table.memory_owner(s as usize) as u32 };
        let src_mem: [u32; MAX_SRC] = std::array::from_fn(|j| mem(srcs[j]));
        for i in to + 1..from {
            let between = self.dense[i];
            if srcs.contains(&between) || src_mem.contains(&between) {
                return false;
            }
            if let Some(root) = self.writes_root(between as usize)
                && src_mem.contains(&(root as u32))
            {
                return false;
            }
        }
        // Groups marked already keep their positions.
        if self.groups[self.first_group..].iter().any(|g| g.range().start <= from && to < g.range().end) {
            return false;
        }
        self.nodes[to + 1..=from].rotate_right(1);
        self.dense[to + 1..=from].rotate_right(1);
        true
    }

    /// Adds an allocation-order edge: the allocator treats `reader` as one
    /// more reader of `t`, so `t`'s memory is not reused before `reader` has
    /// run. `true` when `t` is kept (always for memory the allocator does
    /// not plan: weights, caches, user buffers); `false` when `reader` has
    /// no free source slot for the edge (then the backend must not rely on it).
    pub fn keep_alive(&mut self, t: TensorId, reader: TensorId) -> bool {
        self.count_readers();
        let (Some(td), Some(rd)) = (self.table.lookup(t), self.table.lookup(reader)) else { return false };
        let (td, rd) = (td as usize, rd as usize);
        if self.table.flags(self.table.memory_owner(td)) & flag::EXTERNAL != 0 {
            return true;
        }
        let srcs = self.table.srcs(rd);
        // Kept already when `reader` reads `t` or any view of the same memory.
        let owner = self.table.memory_owner(td);
        if srcs.iter().any(|&s| s != NONE && self.table.memory_owner(s as usize) == owner) {
            return true;
        }
        match srcs.iter().position(|&s| s == NONE) {
            Some(j) => {
                self.table.set_src(rd, j, td as u32);
                true
            }
            None => false,
        }
    }

    /// Marks the `len` nodes from position `start` as a fused group of `kind`.
    /// They must be adjacent already, 2 to [`MAX_FUSED`] of them, and in no
    /// other group.
    pub fn fuse(&mut self, start: usize, len: usize, kind: FusionKind) -> Result<()> {
        let range = start..start + len;
        if !(2..=MAX_FUSED).contains(&len) || range.end > self.nodes.len() {
            return Err(Error::Scheduler(format!(
                "a fused {} group of {len} nodes from position {start} does not fit a split of {} nodes",
                kind.name(),
                self.nodes.len()
            )));
        }
        if let Some(g) =
            self.groups[self.first_group..].iter().find(|g| g.range().start < range.end && range.start < g.range().end)
        {
            return Err(Error::Scheduler(format!(
                "a fused {} group at {start} overlaps the {} group at {}",
                kind.name(),
                g.kind.name(),
                g.start
            )));
        }
        self.groups.push(FusedGroup { start: start as u32, len: len as u32, kind });
        Ok(())
    }
}

/// Runs the optimize system over the placed graph: lays out the run order
/// (the graph's, split by split) and, when `enabled`, lets each split's
/// backend rewrite its split. Groups are kept sorted by position.
pub fn optimize_splits(
    ctx: &Context,
    set: &BackendSet,
    table: &mut TensorTable,
    tables: &mut SplitTables,
    enabled: bool,
) -> Result<()> {
    let mut out = std::mem::take(&mut tables.optimized);
    out.clear();
    out.dense.extend_from_slice(table.node_dense.as_slice());
    out.nodes.extend(out.dense.iter().map(|&d| table.tensor(d as usize)));
    out.readers.counted = false;
    for (s, split) in tables.splits.iter().enumerate() {
        let first_group = out.groups.len();
        if enabled {
            let mut view = SplitRewrite {
                table: &mut *table,
                nodes: &mut out.nodes[split.nodes.clone()],
                dense: &mut out.dense[split.nodes.clone()],
                readers: &mut out.readers,
                groups: &mut out.groups,
                first_group,
            };
            let backend = set.backend(split.backend);
            let result = backend.graph_optimize(ctx, &mut view);
            if let Err(e) = result {
                tables.optimized = out;
                return Err(e.within_backend(backend.name(), format_args!("optimizing split {s}")));
            }
            out.groups[first_group..].sort_unstable_by_key(|g| g.start);
        }
        out.split_groups.push(first_group..out.groups.len());
    }
    tables.optimized = out;
    Ok(())
}

/// Counts each entry's readers among the gathered graph's nodes (sources
/// and views), and its last reader.
fn count_readers(table: &TensorTable, out: &mut ReaderCounts) {
    let n = table.len();
    out.readers.clear();
    out.readers.resize(n, 0);
    out.last_reader.clear();
    out.last_reader.resize(n, NONE);
    for &d in table.node_dense.as_slice() {
        let d = d as usize;
        let srcs = table.srcs(d);
        for (j, &s) in srcs.iter().enumerate() {
            if s != NONE && !srcs[..j].contains(&s) {
                out.readers[s as usize] += 1;
                out.last_reader[s as usize] = d as u32;
            }
        }
        let root = table.root(d);
        if root != NONE && !srcs.contains(&root) {
            out.readers[root as usize] += 1;
            out.last_reader[root as usize] = d as u32;
        }
    }
    out.counted = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_turns_fusion_off() {
        assert!(fusion_enabled(None));
        assert!(fusion_enabled(Some("")));
        assert!(fusion_enabled(Some("0")));
        assert!(!fusion_enabled(Some("1")));
        assert!(!fusion_enabled(Some("yes")));
    }
}
