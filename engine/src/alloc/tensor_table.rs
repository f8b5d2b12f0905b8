//! The facts the planner needs about every tensor a graph touches, in dense
//! columns, gathered in one pass over the graph.
//!
//! Dense indices are given in a fixed order — leafs by position, then nodes
//! by position, then tensors the graph reads without listing them
//! ("extras", in the order they are first read) — so the same graph
//! structure always gets the same indices, whichever tensors sit at its
//! positions. That is what lets a plan be reused for a graph rebuilt from
//! new tensors, and lets the scheduler bind a different tensor to a leaf
//! position on each run.

use std::sync::Arc;

use gantry_arenas::keys::slot_index;
use gantry_arenas::{BufferId, Column, TensorId};

use super::BufferTypeIndex;
use super::fingerprint::Fingerprint;
use crate::tensor::MAX_SRC;
use crate::{BufferType, Context, Error, Graph, Result, TensorDesc, TensorFlags};

/// "No tensor" in a dense link.
pub(crate) const NONE: u32 = u32::MAX;

/// Why a tensor is in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub(crate) enum Role {
    /// Listed among the graph's leafs.
    Leaf = 0,
    /// Listed among the graph's nodes.
    Node = 1,
    /// Read by a node (as a source or view source) without being listed.
    #[default]
    Extra = 2,
}

/// Per-tensor flags (bits of [`TensorTable::flags`]).
pub(crate) mod flag {
    /// A view: its memory is its root's.
    pub(crate) const VIEW: u8 = 1;
    /// Placed in a buffer this allocator does not own: left alone.
    pub(crate) const EXTERNAL: u8 = 2;
    /// A graph input: placed first, never freed, never overwritten in place.
    pub(crate) const INPUT: u8 = 4;
    /// A graph output: never freed, never overwritten in place.
    pub(crate) const OUTPUT: u8 = 8;
    /// A view starting at its root's first byte.
    pub(crate) const AT_ROOT_START: u8 = 16;
    /// Never freed and never reused in place.
    pub(crate) const PROTECTED: u8 = INPUT | OUTPUT;
}

/// Dense per-tensor columns. Every column has one entry per tensor.
#[derive(Default)]
pub(crate) struct TensorTable {
    /// Dense index of each tensor slot (`NONE` when not in the table).
    slot_to_dense: Vec<u32>,
    /// The tensor.
    pub(crate) tensor: Column<TensorId>,
    /// Why it is in the table.
    pub(crate) role: Column<Role>,
    /// Index of its buffer type (the first of equal buffer types).
    pub(crate) buft: Column<BufferTypeIndex>,
    /// [`flag`] bits.
    pub(crate) flags: Column<u8>,
    /// For views: the dense index of the tensor owning the memory.
    pub(crate) root: Column<u32>,
    /// For nodes: dense indices of the sources (`NONE` where unset).
    pub(crate) srcs: Column<[u32; MAX_SRC]>,
    /// Bytes the tensor takes in its buffer type (tensors with memory of their own).
    pub(crate) size: Column<usize>,
    /// Number of source slots of nodes that read this tensor.
    pub(crate) children: Column<u32>,
    /// Number of views of this tensor.
    pub(crate) views: Column<u32>,
    /// For nodes: bit `j` set when source `j` may be overwritten in place
    /// (as far as the layout and buffer types go; liveness decides at plan time).
    pub(crate) in_place: Column<u8>,
    /// Dense index of the tensor at each leaf position.
    pub(crate) leaf_dense: Column<u32>,
    /// Dense index of the tensor at each node position.
    pub(crate) node_dense: Column<u32>,
}

/// What `gather` needs to know about the allocator.
pub(crate) struct GatherEnv<'a> {
    /// The buffer types, by index.
    pub(crate) buffer_types: &'a [Arc<dyn BufferType>],
    /// For each buffer type index, the first index of an equal buffer type.
    pub(crate) canonical: &'a [BufferTypeIndex],
    /// The buffers the allocator owns (tensors in them are re-bound, not left alone).
    pub(crate) own_buffers: &'a [BufferId],
}

impl TensorTable {
    /// Number of tensors.
    pub(crate) fn len(&self) -> usize {
        self.tensor.len()
    }

    /// Fills the table from `graph` and writes the plan's inputs into
    /// `fingerprint`; returns whether they equal the previous ones.
    pub(crate) fn gather(
        &mut self,
        ctx: &Context,
        graph: Graph<'_>,
        node_buft: &[BufferTypeIndex],
        leaf_buft: &[BufferTypeIndex],
        env: &GatherEnv<'_>,
        fingerprint: &mut Fingerprint,
    ) -> Result<bool> {
        fingerprint.begin();
        // Slot indices run up to the capacity inclusive (slotmap keeps slot 0 as a sentinel).
        self.clear(ctx.slot_capacity() + 1);
        check_assignment("node", graph.nodes(), node_buft, env, ctx)?;
        check_assignment("leaf", graph.leafs(), leaf_buft, env, ctx)?;

        for (i, &t) in graph.leafs().iter().enumerate() {
            let d = self.intern(t, Role::Leaf, buft_at(leaf_buft, i, env))?;
            self.leaf_dense.push(d);
        }
        for (i, &t) in graph.nodes().iter().enumerate() {
            let d = self.intern(t, Role::Node, buft_at(node_buft, i, env))?;
            self.node_dense.push(d);
        }
        // Leafs and nodes in order; tensors read without being listed are
        // described as soon as they are met, so a node's sources are always
        // described before the node (in a topologically ordered graph).
        let listed = self.len();
        for d in 0..listed {
            self.describe_entry(ctx, d, env)?;
        }
        for &t in graph.outputs() {
            if let Some(d) = self.lookup(t) {
                self.flags[d as usize] |= flag::OUTPUT;
            }
        }
        for d in 0..self.len() {
            let root = self.root[d];
            if root != NONE && self.flags[root as usize] & flag::VIEW != 0 {
                return Err(Error::Allocator(format!(
                    "view {} reads {}, itself a view: a view's source must own its memory",
                    ctx.describe(self.tensor[d]),
                    ctx.describe(self.tensor[root as usize])
                )));
            }
        }
        self.write_fingerprint(fingerprint);
        Ok(fingerprint.finish())
    }

    /// Empties the table (keeping capacity) and sizes the slot map for `slots` slots.
    fn clear(&mut self, slots: usize) {
        for &t in self.tensor.as_slice() {
            if let Some(s) = self.slot_to_dense.get_mut(slot_index(t)) {
                *s = NONE;
            }
        }
        if self.slot_to_dense.len() < slots {
            self.slot_to_dense.resize(slots, NONE);
        }
        self.tensor.clear();
        self.role.clear();
        self.buft.clear();
        self.flags.clear();
        self.root.clear();
        self.srcs.clear();
        self.size.clear();
        self.children.clear();
        self.views.clear();
        self.in_place.clear();
        self.leaf_dense.clear();
        self.node_dense.clear();
    }

    /// The dense index of `t`, if it is in the table.
    pub(crate) fn lookup(&self, t: TensorId) -> Option<u32> {
        let d = *self.slot_to_dense.get(slot_index(t))?;
        (d != NONE && self.tensor[d as usize] == t).then_some(d)
    }

    /// The dense index of `t`, adding it when new.
    fn intern(&mut self, t: TensorId, role: Role, buft: BufferTypeIndex) -> Result<u32> {
        if let Some(d) = self.lookup(t) {
            return Ok(d);
        }
        let s = slot_index(t);
        if s >= self.slot_to_dense.len() {
            // Only a tensor created after `clear` sized the map can get here.
            self.slot_to_dense.resize(s + 1, NONE);
        }
        let d = u32::try_from(self.len())
            .ok()
            .filter(|&d| d != NONE)
            .ok_or_else(|| Error::Allocator("graph touches more than 2^32 - 1 tensors".into()))?;
        self.slot_to_dense[s] = d;
        self.tensor.push(t);
        self.role.push(role);
        self.buft.push(buft);
        self.flags.push(0);
        self.root.push(NONE);
        self.srcs.push([NONE; MAX_SRC]);
        self.size.push(0);
        self.children.push(0);
        self.views.push(0);
        self.in_place.push(0);
        Ok(d)
    }

    /// The dense index of `t`, adding and describing it when new (a tensor
    /// the graph reads without listing it).
    fn intern_extra(&mut self, ctx: &Context, t: TensorId, buft: BufferTypeIndex, env: &GatherEnv<'_>) -> Result<u32> {
        if let Some(d) = self.lookup(t) {
            return Ok(d);
        }
        let d = self.intern(t, Role::Extra, buft)?;
        self.describe_entry(ctx, d as usize, env)?;
        Ok(d)
    }

    /// Records entry `d`'s layout, view link, memory, flags and (for nodes)
    /// sources and in-place candidates, from one look at its description.
    fn describe_entry(&mut self, ctx: &Context, d: usize, env: &GatherEnv<'_>) -> Result<()> {
        let t = self.tensor[d];
        let desc = ctx.desc(t)?;
        let buft = self.buft[d];
        let mut flags = 0;
        if desc.flags.contains(TensorFlags::INPUT) {
            flags |= flag::INPUT;
        }
        if desc.flags.contains(TensorFlags::OUTPUT) {
            flags |= flag::OUTPUT;
        }
        match desc.view_src {
            Some(r) => {
                let root = self.intern_extra(ctx, r, buft, env)? as usize;
                self.root[d] = root as u32;
                self.views[root] += 1;
                flags |= flag::VIEW;
                if desc.view_offset == 0 {
                    flags |= flag::AT_ROOT_START;
                }
            }
            None if is_external(ctx, t, env.own_buffers) => flags |= flag::EXTERNAL,
            None => self.size[d] = env.buffer_types[buft.get()].alloc_size(desc),
        }
        self.flags[d] = flags;
        if self.role[d] == Role::Node {
            let runs_in_place = desc.op.can_run_in_place() && flags & (flag::VIEW | flag::EXTERNAL) == 0;
            let srcs = desc.srcs;
            let mut mask = 0;
            for (j, src) in srcs.iter().enumerate() {
                if let Some(s) = *src {
                    let sd = self.intern_extra(ctx, s, buft, env)?;
                    self.srcs[d][j] = sd;
                    self.children[sd as usize] += 1;
                    if runs_in_place && self.may_take_over(ctx, desc, d, sd as usize) {
                        mask |= 1 << j;
                    }
                }
            }
            self.in_place[d] = mask;
        }
        Ok(())
    }

    /// Whether node `d` may take over the memory of its source `p`, as far as
    /// static facts go: `p` has `d`'s layout, its memory is planned here in
    /// `d`'s buffer type, and (for a view) starts at its root's first byte.
    /// A source listed after `d` (not yet described) is never taken over.
    fn may_take_over(&self, ctx: &Context, desc: &TensorDesc, d: usize, p: usize) -> bool {
        if self.role[p] == Role::Node && p > d {
            return false;
        }
        let is_view = self.flags[p] & flag::VIEW != 0;
        let owner = if is_view { self.root[p] as usize } else { p };
        self.flags[owner] & (flag::EXTERNAL | flag::VIEW) == 0
            && self.buft[owner] == self.buft[d]
            && (!is_view || self.flags[p] & flag::AT_ROOT_START != 0)
            && ctx.get(self.tensor[p]).is_some_and(|src| same_layout(src, desc))
    }

    fn write_fingerprint(&self, f: &mut Fingerprint) {
        f.push_pair(self.leaf_dense.len() as u32, self.node_dense.len() as u32);
        for pair in self.leaf_dense.as_slice().chunks(2) {
            f.push_pair(pair[0], pair.get(1).copied().unwrap_or(NONE));
        }
        for pair in self.node_dense.as_slice().chunks(2) {
            f.push_pair(pair[0], pair.get(1).copied().unwrap_or(NONE));
        }
        for d in 0..self.len() {
            let head = u32::from(self.role[d] as u8)
                | (self.buft[d].get() as u32) << 8
                | u32::from(self.flags[d]) << 16
                | u32::from(self.in_place[d]) << 24;
            f.push_pair(head, self.root[d]);
            f.push(self.size[d] as u64);
            // Only nodes have sources (the role in `head` keeps the record unambiguous).
            if self.role[d] == Role::Node {
                let s = self.srcs[d];
                f.push_pair(s[0], s[1]);
                f.push_pair(s[2], s[3]);
            }
        }
    }
}

/// Whether two tensors have the same dtype, shape and strides, so that one
/// can be computed element for element over the other (ggml's `ggml_are_same_layout`).
fn same_layout(a: &TensorDesc, b: &TensorDesc) -> bool {
    a.dtype == b.dtype && a.ne == b.ne && a.nb == b.nb
}

/// Whether `t` (not a view) already has memory in a live buffer that this allocator does not own.
fn is_external(ctx: &Context, t: TensorId, own_buffers: &[BufferId]) -> bool {
    ctx.placement(t).is_some_and(|p| !own_buffers.contains(&p.buffer) && ctx.buffer(p.buffer).is_ok())
}

fn buft_at(assignment: &[BufferTypeIndex], i: usize, env: &GatherEnv<'_>) -> BufferTypeIndex {
    env.canonical[assignment.get(i).copied().unwrap_or_default().get()]
}

/// Checks a node or leaf buffer-type assignment: empty (all 0), or one valid
/// index per position.
fn check_assignment(
    what: &str,
    tensors: &[TensorId],
    assignment: &[BufferTypeIndex],
    env: &GatherEnv<'_>,
    ctx: &Context,
) -> Result<()> {
    let n_types = env.buffer_types.len();
    if n_types == 0 {
        return Err(Error::Allocator("the graph allocator was created without buffer types".into()));
    }
    if !assignment.is_empty() && assignment.len() != tensors.len() {
        return Err(Error::Allocator(format!(
            "{} {what} buffer-type indices given for a graph of {} {what}s",
            assignment.len(),
            tensors.len()
        )));
    }
    if let Some(i) = assignment.iter().position(|&b| b.get() >= n_types) {
        return Err(Error::Allocator(format!(
            "{what} {i} ({}) is assigned buffer type {}, but the allocator has {n_types}",
            ctx.describe(tensors[i]),
            assignment[i].get()
        )));
    }
    Ok(())
}
