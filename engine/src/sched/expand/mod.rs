//! The expand system: spread the assign system's choices through the graph
//! until every tensor has a backend, then make nodes computed in place run
//! where their memory is ([`in_place`]).

pub mod in_place;

use super::gathered::Gathered;
use super::tables::Assignments;
use super::{BackendIndex, Cause};
use crate::alloc::tensor_table::NONE;
use crate::{Error, Result};
use in_place::can_use;

/// Spreads the assign system's choices, in four steps:
/// 1. spread: GPU assignments down then up the node list (the CPU does not
///    spread here), then all assignments down then up, only onto backends
///    that support the op;
/// 2. upgrade: a node moves to a higher-priority backend with the same
///    buffer type that supports the op and all its sources' buffers; a node
///    still unassigned goes to the backend supporting the most of its sources;
/// 3. views follow their view source, sources their consumer; a node still
///    unassigned goes to the first backend supporting it;
/// 4. in place ([`in_place::place_in_place_nodes`]): a node computed in
///    place runs where its memory is.
///
/// Every node and source ends assigned, or this returns an `Err` naming the
/// node no backend can run.
pub fn expand_assignments(g: Gathered<'_>, spread_order: &mut Vec<u32>, out: &mut Assignments) -> Result<()> {
    let table = g.table;
    let nodes = table.walk.as_slice();
    let cpu = g.set.cpu();
    // Steps 1 and 2 pass over view ops (they have no backend of their own);
    // the spreading sweeps walk the nodes that compute four times, so list them once.
    spread_order.clear();
    spread_order.extend_from_slice(nodes);
    spread_order.retain(|&d| !g.is_view_op(d as usize));
    let order = spread_order.as_slice();
    // Step 1: GPU spread down and up, then everything down and up. A sweep
    // only assigns nodes still unassigned: once none is left, the later
    // sweeps would change nothing.
    let sweeps: [(bool, Option<BackendIndex>, Cause); 4] = [
        (false, Some(cpu), Cause::ExpandGpu),
        (true, Some(cpu), Cause::ExpandGpu),
        (false, None, Cause::Expand),
        (true, None, Cause::Expand),
    ];
    for (up, skip, cause) in sweeps {
        let left = if up {
            spread(g, order.iter().rev(), out, skip, cause)
        } else {
            spread(g, order.iter(), out, skip, cause)
        };
        if left == 0 {
            break;
        }
    }

    // Step 2: upgrades, and nodes still unassigned.
    for &node in order {
        let node = node as usize;
        match out.get(node) {
            None => {
                let mut best: Option<(usize, BackendIndex)> = None;
                for b in g.set.indices() {
                    if !g.supports(b, node) {
                        continue;
                    }
                    let n = g
                        .sources(node)
                        .filter(|&s| {
                            let assigned = out.get(s).is_some() || g.view_src(s).is_some_and(|v| out.get(v).is_some());
                            assigned && buffer_supported(g, s, b, out)
                        })
                        .count();
                    if best.is_none_or(|(bn, _)| n > bn) {
                        best = Some((n, b));
                    }
                }
                if let Some((_, b)) = best {
                    out.set(node, b, Cause::MostSources);
                }
            }
            // The highest-priority backend has nowhere to move up to.
            Some(cur) if cur.get() == 0 => {}
            // Pins are never overwritten.
            Some(_) if out.cause(node) == Cause::User => {}
            Some(cur) => {
                for b in cur.higher() {
                    if g.set.alloc_buft(b) == g.set.alloc_buft(cur)
                        && g.supports(b, node)
                        && g.sources(node).all(|s| buffer_supported(g, s, b, out))
                    {
                        out.set(node, b, Cause::Upgrade);
                        break;
                    }
                }
            }
        }
    }

    // Step 3: views follow their source, sources their consumer.
    for &node in nodes {
        let node = node as usize;
        let view_src = g.view_src(node);
        let cur = match out.get(node) {
            Some(b) => b,
            None => {
                let b = match view_src.and_then(|v| out.get(v)) {
                    Some(b) => (b, Cause::ViewSource),
                    None => match g.set.indices().find(|&b| g.supports(b, node)) {
                        Some(b) => (b, Cause::Fallback),
                        None => return Err(no_backend_error(g, node)),
                    },
                };
                out.set(node, b.0, b.1);
                b.0
            }
        };
        // The destination of a CPY / SET_ROWS is a view source but not a source.
        if let Some(v) = view_src
            && out.get(v).is_none()
        {
            out.set(v, cur, Cause::Consumer);
        }
        for src in table.srcs(node) {
            if src == NONE {
                continue;
            }
            let src = src as usize;
            if out.get(src).is_some() {
                continue;
            }
            match g.view_src(src).and_then(|v| out.get(v)) {
                Some(b) => out.set(src, b, Cause::ViewSource),
                None => out.set(src, cur, Cause::Consumer),
            }
        }
    }
    // Leafs nobody reads directly (only as a view source of a view) still need a home.
    for &leaf in table.leaf_walk.as_slice() {
        if out.get(leaf as usize).is_none() {
            out.set(leaf as usize, cpu, Cause::Fallback);
        }
    }
    // Step 4.
    in_place::place_in_place_nodes(g, out)
}

/// The error for a node no backend runs.
#[cold]
fn no_backend_error(g: Gathered<'_>, node: usize) -> Error {
    let (ctx, t) = (g.ctx, g.table.tensor(node));
    Error::Scheduler(format!(
        "no backend supports op {} for tensor {} (backends: {})",
        ctx.get(t).map_or("?", |d| d.op.name()),
        ctx.describe(t),
        g.set.backends().iter().map(|b| b.name()).collect::<Vec<_>>().join(", ")
    ))
}

/// One sweep over nodes that compute: carry the current backend onto
/// unassigned nodes that it supports. With `skip = Some(cpu)`, a CPU node
/// stops the carry (only GPUs spread). Returns how many nodes the sweep
/// left unassigned.
fn spread<'a>(
    g: Gathered<'_>,
    order: impl Iterator<Item = &'a u32>,
    out: &mut Assignments,
    skip: Option<BackendIndex>,
    cause: Cause,
) -> usize {
    let mut cur: Option<BackendIndex> = None;
    let mut left = 0;
    for &node in order {
        let node = node as usize;
        match out.get(node) {
            Some(b) => cur = if Some(b) == skip { None } else { Some(b) },
            None => match cur {
                Some(b) if g.supports(b, node) => out.set(node, b, cause),
                _ => left += 1,
            },
        }
    }
    left
}

/// Whether backend `b` can read entry `d` where it lives: its own buffer
/// when pre-allocated, else the buffer type of the backend its memory
/// belongs to (its view source's for a view: a view, even one computed in
/// place, has no memory of its own).
pub fn buffer_supported(g: Gathered<'_>, d: usize, b: BackendIndex, out: &Assignments) -> bool {
    if let Some(buffer) = g.prealloc(d) {
        return buffer.readable_by(b);
    }
    let memory = match g.view_src(d) {
        Some(v) => out.get(v),
        None => out.get(d),
    };
    memory.is_some_and(|mem| can_use(g.set, b, mem))
}
