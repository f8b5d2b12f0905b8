//! An independent check of a graph's memory placement: from the graph alone
//! (not from the allocator's records), when each tensor's memory must stay
//! intact, and whether any two tensors that must be intact at the same time
//! share bytes.

use std::collections::HashMap;

use crate::{Context, Graph, TensorFlags, TensorId};

/// When a tensor's memory holds a value that someone will still read:
/// from `def` (the node that writes it; -1 for leafs and inputs) to `last`
/// (the last node that reads it, directly or through a view; `i64::MAX` for
/// outputs and inputs, which are never given up).
#[derive(Debug, Clone, Copy)]
pub struct Lifetime {
    /// The node that writes it (-1 for leafs and inputs).
    pub def: i64,
    /// The last node that reads it (`i64::MAX`: never given up).
    pub last: i64,
}

/// Lifetimes of every tensor of `graph` that owns memory (views are folded into their root).
pub fn lifetimes(ctx: &Context, graph: Graph<'_>) -> HashMap<TensorId, Lifetime> {
    let root = |t: TensorId| ctx.desc(t).unwrap().view_src.unwrap_or(t);
    let mut life: HashMap<TensorId, Lifetime> = HashMap::new();
    for &t in graph.leafs() {
        life.insert(root(t), Lifetime { def: -1, last: -1 });
    }
    for (i, &t) in graph.nodes().iter().enumerate() {
        let i = i as i64;
        life.entry(root(t)).or_insert(Lifetime { def: i, last: i });
        let d = ctx.desc(t).unwrap();
        for s in d.sources() {
            let l = life.get_mut(&root(s)).expect("sources come before their readers");
            l.last = l.last.max(i);
        }
        if d.view_src.is_some() {
            // Writing through a view (SET_ROWS, CPY) or defining one touches the root here.
            let l = life.get_mut(&root(t)).unwrap();
            l.last = l.last.max(i);
        }
    }
    let protect = |t: TensorId, life: &mut HashMap<TensorId, Lifetime>| {
        if let Some(l) = life.get_mut(&root(t)) {
            l.last = i64::MAX;
        }
    };
    for &t in graph.nodes().iter().chain(graph.leafs()) {
        let f = ctx.desc(t).unwrap().flags;
        if f.contains(TensorFlags::INPUT) {
            protect(t, &mut life);
            life.get_mut(&root(t)).unwrap().def = -1;
        }
        if f.contains(TensorFlags::OUTPUT) {
            protect(t, &mut life);
        }
    }
    for &t in graph.outputs() {
        protect(t, &mut life);
    }
    life
}

/// Whether node `b` may legally be computed over `a`'s memory: it is the
/// last reader of `a`, runs in place, reads `a` exactly once — directly or
/// through a view starting at `a`'s first byte — with its own layout.
fn legal_in_place(ctx: &Context, a: TensorId, b: TensorId) -> bool {
    let db = ctx.desc(b).unwrap();
    if !db.op.can_run_in_place() {
        return false;
    }
    let reads: Vec<TensorId> = db.sources().filter(|&s| ctx.desc(s).unwrap().view_src.unwrap_or(s) == a).collect();
    if reads.len() != 1 {
        return false;
    }
    let s = ctx.desc(reads[0]).unwrap();
    s.dtype == db.dtype && s.ne == db.ne && s.nb == db.nb && s.view_offset == 0
}

/// Checks that no two tensors of `graph` whose lifetimes intersect share
/// bytes of one buffer, except a node computed legally in place over a
/// tensor it reads last. Returns the number of in-place pairs seen.
pub fn check_no_live_overlap(ctx: &Context, graph: Graph<'_>) -> Result<usize, String> {
    let life = lifetimes(ctx, graph);
    let mut spans: Vec<(TensorId, crate::Placement, usize, Lifetime)> = vec![];
    for (&t, &l) in &life {
        let p = ctx.placement(t).ok_or_else(|| format!("{} has no memory", ctx.describe(t)))?;
        let n = ctx.desc(t).unwrap().nbytes();
        if n > 0 {
            spans.push((t, p, n, l));
        }
    }
    spans.sort_by_key(|s| (s.1.buffer, s.1.offset));
    let mut in_place = 0;
    for (i, &(a, pa, na, la)) in spans.iter().enumerate() {
        for &(b, pb, _nb, lb) in &spans[i + 1..] {
            if pb.buffer != pa.buffer || pb.offset >= pa.offset + na {
                break;
            }
            if la.last < lb.def || lb.last < la.def {
                continue;
            }
            let ok =
                (la.last == lb.def && legal_in_place(ctx, a, b)) || (lb.last == la.def && legal_in_place(ctx, b, a));
            if !ok {
                return Err(format!(
                    "{} [{}, {}] at {} and {} [{}, {}] at {} share memory while both are live",
                    ctx.describe(a),
                    la.def,
                    la.last,
                    pa.offset,
                    ctx.describe(b),
                    lb.def,
                    lb.last,
                    pb.offset
                ));
            }
            in_place += 1;
        }
    }
    Ok(in_place)
}

/// Sum of the bytes of every tensor of `graph` that owns memory and is not
/// placed in one of `except` (pre-allocated buffers).
pub fn owned_bytes(ctx: &Context, graph: Graph<'_>, except: &[crate::BufferId]) -> usize {
    lifetimes(ctx, graph)
        .keys()
        .filter(|&&t| ctx.placement(t).is_none_or(|p| !except.contains(&p.buffer)))
        .map(|&t| ctx.desc(t).unwrap().nbytes())
        .sum()
}
