//! Deep copies of allocated graphs onto another backend, and node-by-node
//! comparison of two backends (ggml's `ggml_backend_graph_copy` and
//! `ggml_backend_compare_graph_backend`).

use std::collections::HashMap;

use gantry_arenas::{BufferId, TensorId};

use crate::{Backend, BufferUsage, Context, Error, Graph, MAX_SRC, Result};

/// A graph copied onto another backend's memory: every tensor duplicated
/// (views re-created over the copied sources), data copied.
#[derive(Debug)]
pub struct GraphCopy {
    /// The copied nodes, in the original order.
    pub nodes: Vec<TensorId>,
    /// The copied leafs, in the original order.
    pub leafs: Vec<TensorId>,
    /// The buffer holding every copied tensor.
    pub buffer: BufferId,
    map: HashMap<TensorId, TensorId>,
}

impl GraphCopy {
    /// The copy of an original tensor.
    pub fn copy_of(&self, original: TensorId) -> Option<TensorId> {
        self.map.get(&original).copied()
    }

    /// The copied graph.
    pub fn graph(&self) -> Graph<'_> {
        Graph::from_parts(&self.nodes, &self.leafs, &[])
    }

    /// Removes the copied tensors and frees their buffer.
    pub fn free(self, ctx: &mut Context) -> Result<()> {
        for &t in self.map.values() {
            let _ = ctx.remove(t);
        }
        ctx.free_buffer(self.buffer)
    }
}

/// Copies every tensor of the allocated `graph` into one buffer of
/// `backend`'s buffer type: views are re-created over the copied sources,
/// everything else gets the original's bytes.
pub fn graph_copy(ctx: &mut Context, graph: Graph<'_>, backend: &dyn Backend) -> Result<GraphCopy> {
    // Every tensor the graph touches: nodes, leafs, and their view sources.
    let mut order: Vec<TensorId> = Vec::new();
    let mut seen: HashMap<TensorId, ()> = HashMap::new();
    let mut visit = |t: TensorId, order: &mut Vec<TensorId>, ctx: &Context| -> Result<()> {
        let mut stack = vec![t];
        while let Some(t) = stack.pop() {
            if seen.insert(t, ()).is_some() {
                continue;
            }
            let d = ctx.desc(t)?;
            if let Some(v) = d.view_src {
                stack.push(v);
            }
            stack.extend(d.sources());
            order.push(t);
        }
        Ok(())
    };
    for &t in graph.leafs().iter().chain(graph.nodes()) {
        visit(t, &mut order, ctx)?;
    }
    let buft = backend.device().buffer_type();
    let align = buft.alignment();
    let mut size = 0usize;
    let mut offsets = HashMap::new();
    for &t in &order {
        let d = ctx.desc(t)?;
        if d.view_src.is_none() {
            offsets.insert(t, size);
            size = size
                .checked_add(buft.alloc_size(&d.layout()))
                .map(|s| s.next_multiple_of(align))
                .ok_or_else(|| Error::Overflow("graph copy size".into()))?;
        }
    }
    let buffer = ctx.alloc_buffer(&buft, size, BufferUsage::Compute)?;
    let mut map = HashMap::new();
    // Roots first (no view source), then views over the copied roots.
    for pass_views in [false, true] {
        for &t in &order {
            let d = *ctx.desc(t)?;
            if d.view_src.is_some() != pass_views {
                continue;
            }
            let mut copy = d;
            copy.view_src = d.view_src.and_then(|v| map.get(&v).copied());
            let id = ctx.insert_scratch(copy);
            if !pass_views {
                ctx.place(id, buffer, offsets[&t])?;
            }
            map.insert(t, id);
        }
    }
    // Rewire sources to the copies, then copy the bytes of every root.
    for (&orig, &copy) in &map {
        let srcs = ctx.desc(orig)?.srcs;
        let mut remapped = [None; MAX_SRC];
        for (j, s) in srcs.iter().enumerate() {
            remapped[j] = s.and_then(|s| map.get(&s).copied());
        }
        ctx.desc_mut(copy)?.srcs = remapped;
    }
    for &t in &order {
        let d = ctx.desc(t)?;
        if d.view_src.is_none() && d.nbytes() > 0 && ctx.is_allocated(t) {
            ctx.copy_tensor(t, map[&t])?;
        }
    }
    let nodes = graph.nodes().iter().map(|t| map[t]).collect();
    let leafs = graph.leafs().iter().map(|t| map[t]).collect();
    Ok(GraphCopy { nodes, leafs, buffer, map })
}

/// Computes `graph` node by node on `backend1` (where it is allocated) and on
/// a copy of it on `backend2`, calling `callback(index, node1, node2)` after
/// each computed node with both results in memory; stops when the callback
/// returns `false`. The copy is freed before returning.
pub fn compare_backends(
    ctx: &mut Context,
    graph: Graph<'_>,
    backend1: &dyn Backend,
    backend2: &dyn Backend,
    mut callback: impl FnMut(&Context, usize, TensorId, TensorId) -> bool,
) -> Result<()> {
    let copy = graph_copy(ctx, graph, backend2)?;
    let result = (|| {
        let nodes1 = graph.nodes();
        for i in 0..nodes1.len() {
            let d = ctx.desc(nodes1[i])?;
            if d.op.is_empty() {
                continue;
            }
            backend1.graph_compute(ctx, Graph::from_parts(&nodes1[i..=i], &[], &[])).into_result()?;
            backend2.graph_compute(ctx, Graph::from_parts(&copy.nodes[i..=i], &[], &[])).into_result()?;
            if !callback(ctx, i, nodes1[i], copy.nodes[i]) {
                break;
            }
        }
        Ok(())
    })();
    copy.free(ctx)?;
    result
}
