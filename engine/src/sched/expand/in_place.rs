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

use crate::sched::gathered::Gathered;
use crate::sched::tables::Assignments;
use crate::sched::{BackendIndex, BackendSet, Cause};
use crate::{Error, Result};

/// Whether backend `b` can use memory of backend `mem`'s buffer type.
#[inline]
pub fn can_use(set: &BackendSet, b: BackendIndex, mem: BackendIndex) -> bool {
    set.can_use(b, mem)
}

/// Moves in-place nodes (and, when needed, their view source's memory) so
/// that each runs on a backend that can use the memory it writes.
pub fn place_in_place_nodes(g: Gathered<'_>, out: &mut Assignments) -> Result<()> {
    let table = g.table;
    for &node in table.walk.as_slice() {
        let node = node as usize;
        let Some(root) = g.view_src(node) else { continue };
        if !g.computes(node) || g.prealloc(root).is_some() {
            continue;
        }
        let (Some(b), Some(mem)) = (out.get(node), out.get(root)) else { continue };
        if !can_use(g.set, b, mem) {
            place_root(g, root, out)?;
        }
    }
    Ok(())
}

/// Where an in-place node of memory `mem` can run: its own backend when it
/// can use `mem`; pinned elsewhere, nowhere; else `mem`'s backend, then the
/// first by priority that can use `mem` and supports the op.
fn home_of(g: Gathered<'_>, node: usize, mem: BackendIndex, out: &Assignments) -> Option<BackendIndex> {
    let cur = out.get(node)?;
    if can_use(g.set, cur, mem) {
        return Some(cur);
    }
    if out.cause(node) == Cause::User {
        return None;
    }
    std::iter::once(mem).chain(g.set.indices()).find(|&b| can_use(g.set, b, mem) && g.supports(b, node))
}

/// Finds memory for `root` where every in-place node over it can run, and
/// moves them there.
fn place_root(g: Gathered<'_>, root: usize, out: &mut Assignments) -> Result<()> {
    let (ctx, table) = (g.ctx, g.table);
    let set = g.set;
    let in_place = || table.walk.as_slice().iter().map(|&n| n as usize).filter(move |&n| g.view_src(n) == Some(root));
    let root_t = table.tensor(root);
    let current = out.get(root).unwrap_or(set.cpu());
    let pinned = out.cause(root) == Cause::User;
    let fits = |mem: BackendIndex| {
        (!g.computes(root) || g.supports(mem, root))
            && in_place().filter(|&n| g.computes(n)).all(|n| home_of(g, n, mem, out).is_some())
    };
    let candidates = std::iter::once(current).chain(set.indices().filter(|_| !pinned));
    let Some(mem) = candidates.clone().find(|&m| fits(m)) else {
        let node = in_place().find(|&n| g.computes(n) && home_of(g, n, current, out).is_none()).unwrap_or(root);
        let node_t = table.tensor(node);
        return Err(Error::Scheduler(format!(
            "{} computes {} in place over {}, but no backend that can use {}'s memory ({}{}) runs it",
            ctx.describe(node_t),
            ctx.get(node_t).map_or("?", |d| d.op.name()),
            ctx.describe(root_t),
            ctx.describe(root_t),
            set.buft(current).name(),
            if pinned { ", pinned" } else { "" },
        )));
    };
    if mem != current {
        out.set(root, mem, Cause::InPlace);
    }
    let nodes: smallvec::SmallVec<[usize; 8]> = in_place().collect();
    for n in nodes {
        if !g.computes(n) {
            // A pure view has no backend of its own: it is where its memory is.
            if g.is_view_op(n) && out.cause(n) != Cause::User {
                out.set(n, mem, Cause::ViewSource);
            }
            continue;
        }
        match home_of(g, n, mem, out) {
            Some(b) if Some(b) != out.get(n) => out.set(n, b, Cause::InPlace),
            _ => {}
        }
    }
    Ok(())
}
