//! The expand system: spread the assign system's choices through the graph
//! until every tensor has a backend, then make nodes computed in place run
//! where their memory is ([`in_place`]).

pub mod in_place;

use gantry_arenas::TensorId;

use super::backend_set::is_view_op;
use super::tables::{Assignments, Prealloc};
use super::{BackendIndex, BackendSet, Cause};
use crate::{Context, Error, Graph, Result};
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
pub fn expand_assignments(
    ctx: &Context,
    graph: Graph<'_>,
    set: &BackendSet,
    pre: &Prealloc,
    out: &mut Assignments,
) -> Result<()> {
    let nodes = graph.nodes();
    let cpu = set.cpu();
    // Step 1: GPU spread down and up, then everything down and up.
    spread(ctx, nodes.iter().copied(), set, out, Some(cpu), Cause::ExpandGpu)?;
    spread(ctx, nodes.iter().rev().copied(), set, out, Some(cpu), Cause::ExpandGpu)?;
    spread(ctx, nodes.iter().copied(), set, out, None, Cause::Expand)?;
    spread(ctx, nodes.iter().rev().copied(), set, out, None, Cause::Expand)?;

    // Step 2: upgrades, and nodes still unassigned.
    for &node in nodes {
        let desc = ctx.desc(node)?;
        if is_view_op(&desc.op) {
            continue;
        }
        match out.get(node) {
            None => {
                let mut best: Option<(usize, BackendIndex)> = None;
                for b in set.indices() {
                    if !set.supports_op(b, ctx, node) {
                        continue;
                    }
                    let n = desc
                        .sources()
                        .filter(|&s| {
                            let assigned = out.get(s).is_some()
                                || ctx.get(s).and_then(|d| d.view_src).is_some_and(|v| out.get(v).is_some());
                            assigned && buffer_supported(ctx, s, b, set, pre, out)
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
            // Pins are never overwritten.
            Some(_) if out.cause(node) == Cause::User => {}
            Some(cur) => {
                for b in cur.higher() {
                    if set.alloc_buft(b) == set.alloc_buft(cur)
                        && set.supports_op(b, ctx, node)
                        && desc.sources().all(|s| buffer_supported(ctx, s, b, set, pre, out))
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
        let desc = ctx.desc(node)?;
        if out.get(node).is_none()
            && let Some(v) = desc.view_src
            && let Some(b) = out.get(v)
        {
            out.set(node, b, Cause::ViewSource);
        }
        if out.get(node).is_none() {
            if let Some(b) = set.indices().find(|&b| set.supports_op(b, ctx, node)) {
                out.set(node, b, Cause::Fallback);
            } else {
                return Err(Error::Scheduler(format!(
                    "no backend supports op {} for tensor {} (backends: {})",
                    desc.op.name(),
                    ctx.describe(node),
                    set.backends().iter().map(|b| b.name()).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        let cur = out.get(node).unwrap_or(set.cpu());
        // The destination of a CPY / SET_ROWS is a view source but not a source.
        if let Some(v) = desc.view_src
            && out.get(v).is_none()
        {
            out.set(v, cur, Cause::Consumer);
        }
        for src in desc.sources() {
            if out.get(src).is_some() {
                continue;
            }
            let src_view = ctx.get(src).and_then(|d| d.view_src);
            match src_view.and_then(|v| out.get(v)) {
                Some(b) => out.set(src, b, Cause::ViewSource),
                None => out.set(src, cur, Cause::Consumer),
            }
        }
    }
    // Leafs nobody reads directly (only as a view source of a view) still need a home.
    for &leaf in graph.leafs() {
        if out.get(leaf).is_none() {
            out.set(leaf, set.cpu(), Cause::Fallback);
        }
    }
    // Step 4.
    in_place::place_in_place_nodes(ctx, graph, set, pre, out)
}

/// One sweep: carry the current backend onto unassigned nodes that it supports.
/// With `skip = Some(cpu)`, a CPU node stops the carry (only GPUs spread).
fn spread(
    ctx: &Context,
    order: impl Iterator<Item = TensorId>,
    set: &BackendSet,
    out: &mut Assignments,
    skip: Option<BackendIndex>,
    cause: Cause,
) -> Result<()> {
    let mut cur: Option<BackendIndex> = None;
    for node in order {
        if is_view_op(&ctx.desc(node)?.op) {
            continue;
        }
        match out.get(node) {
            Some(b) => cur = if Some(b) == skip { None } else { Some(b) },
            None => {
                if let Some(b) = cur
                    && set.supports_op(b, ctx, node)
                {
                    out.set(node, b, cause);
                }
            }
        }
    }
    Ok(())
}

/// Whether backend `b` can read `t` where it lives: its own buffer when
/// pre-allocated, else the buffer type of the backend its memory belongs to
/// (its view source's for a view: a view, even one computed in place, has no
/// memory of its own).
pub fn buffer_supported(
    ctx: &Context,
    t: TensorId,
    b: BackendIndex,
    set: &BackendSet,
    pre: &Prealloc,
    out: &Assignments,
) -> bool {
    if let Some(buffer) = pre.get(t) {
        return buffer.readable_by(b);
    }
    let memory = match ctx.get(t).and_then(|d| d.view_src) {
        Some(v) => out.get(v),
        None => out.get(t),
    };
    memory.is_some_and(|mem| can_use(set, b, mem))
}
