//! The expand system's last step: nodes computed in place run where their
//! memory is.
//!
//! A node computed in place (`add_inplace`, `rope_inplace`, ...) is a view:
//! it writes into its view source's memory, and later readers of the view
//! source see what it wrote. Its memory is where the view source lives: the
//! buffer type of the view source's backend. The spreading steps place
//! nodes by op support and neighbours, not by memory, so such a node can end
//! on a backend that cannot use that memory; computing it from a copy would
//! leave the real memory stale. (ggml does not handle this either: a CPU
//! node writing into device memory faults.)
//!
//! The fix keeps the spreading steps unchanged and repairs afterwards, per view
//! source that has a misplaced in-place node: move the in-place nodes to a
//! backend that can use the view source's memory and supports their op; if
//! one cannot move (pinned, or no such backend), move the view source's
//! memory instead, to the first backend (its current one, then by priority)
//! where it and all its in-place nodes fit. Pins are never overwritten:
//! when they make this impossible, this step returns an `Err` naming the node.
//!
//! Pre-allocated view sources (a KV cache written by CPY) are the assign
//! system's: their in-place nodes were already placed by their buffer.

use gantry_arenas::TensorId;

use crate::sched::backend_set::is_view_op;
use crate::sched::tables::{Assignments, Prealloc};
use crate::sched::{BackendIndex, BackendSet, Cause};
use crate::{Context, Error, Graph, Result};

/// Whether backend `b` can use memory of backend `mem`'s buffer type.
#[inline]
pub fn can_use(set: &BackendSet, b: BackendIndex, mem: BackendIndex) -> bool {
    b == mem || set.alloc_buft(b) == set.alloc_buft(mem) || set.supports_buft(b, set.buft(mem).as_ref())
}

/// Whether `t` computes something (not a leaf, not a pure view).
#[inline]
fn computes(ctx: &Context, t: TensorId) -> bool {
    ctx.get(t).is_some_and(|d| !d.op.is_empty())
}

/// Moves in-place nodes (and, when needed, their view source's memory) so
/// that each runs on a backend that can use the memory it writes.
pub fn place_in_place_nodes(
    ctx: &Context,
    graph: Graph<'_>,
    set: &BackendSet,
    pre: &Prealloc,
    out: &mut Assignments,
) -> Result<()> {
    for &node in graph.nodes() {
        let d = ctx.desc(node)?;
        let Some(root) = d.view_src else { continue };
        if d.op.is_empty() || pre.get(root).is_some() {
            continue;
        }
        let (Some(b), Some(mem)) = (out.get(node), out.get(root)) else { continue };
        if !can_use(set, b, mem) {
            place_root(ctx, graph, set, root, out)?;
        }
    }
    Ok(())
}

/// Where an in-place node of memory `mem` can run: its own backend when it
/// can use `mem`; pinned elsewhere, nowhere; else `mem`'s backend, then the
/// first by priority that can use `mem` and supports the op.
fn home_of(
    ctx: &Context,
    set: &BackendSet,
    node: TensorId,
    mem: BackendIndex,
    out: &Assignments,
) -> Option<BackendIndex> {
    let cur = out.get(node)?;
    if can_use(set, cur, mem) {
        return Some(cur);
    }
    if out.cause(node) == Cause::User {
        return None;
    }
    std::iter::once(mem).chain(set.indices()).find(|&b| can_use(set, b, mem) && set.supports_op(b, ctx, node))
}

/// Finds memory for `root` where every in-place node over it can run, and
/// moves them there.
fn place_root(ctx: &Context, graph: Graph<'_>, set: &BackendSet, root: TensorId, out: &mut Assignments) -> Result<()> {
    let in_place =
        || graph.nodes().iter().copied().filter(move |&n| ctx.get(n).is_some_and(|d| d.view_src == Some(root)));
    let current = out.get(root).unwrap_or(set.cpu());
    let pinned = out.cause(root) == Cause::User;
    let fits = |mem: BackendIndex| {
        (!computes(ctx, root) || set.supports_op(mem, ctx, root))
            && in_place().filter(|&n| computes(ctx, n)).all(|n| home_of(ctx, set, n, mem, out).is_some())
    };
    let candidates = std::iter::once(current).chain(set.indices().filter(|_| !pinned));
    let Some(mem) = candidates.clone().find(|&m| fits(m)) else {
        let node =
            in_place().find(|&n| computes(ctx, n) && home_of(ctx, set, n, current, out).is_none()).unwrap_or(root);
        return Err(Error::Scheduler(format!(
            "{} computes {} in place over {}, but no backend that can use {}'s memory ({}{}) runs it",
            ctx.describe(node),
            ctx.get(node).map_or("?", |d| d.op.name()),
            ctx.describe(root),
            ctx.describe(root),
            set.buft(current).name(),
            if pinned { ", pinned" } else { "" },
        )));
    };
    if mem != current {
        out.set(root, mem, Cause::InPlace);
    }
    let nodes: smallvec::SmallVec<[TensorId; 8]> = in_place().collect();
    for n in nodes {
        if !computes(ctx, n) {
            // A pure view has no backend of its own: it is where its memory is.
            let is_view = ctx.get(n).is_some_and(|d| is_view_op(&d.op));
            if is_view && out.cause(n) != Cause::User {
                out.set(n, mem, Cause::ViewSource);
            }
            continue;
        }
        match home_of(ctx, set, n, mem, out) {
            Some(b) if Some(b) != out.get(n) => out.set(n, b, Cause::InPlace),
            _ => {}
        }
    }
    Ok(())
}
