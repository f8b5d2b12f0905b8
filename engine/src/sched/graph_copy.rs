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
    /// The multi-buffer holding every copied tensor (in chunks of at most
    /// the backend buffer type's `max_size`).
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

/// Copies every tensor of the allocated `graph` into a multi-buffer of
/// `backend`'s buffer type (as many chunks as its `max_size` demands):
/// views are re-created over the copied sources, everything else gets the
/// original's bytes. A single tensor larger than `max_size` is an `Err`
/// naming it; on an error the copies made so far are removed.
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
    // Pack the roots into chunks of at most the buffer type's max size
    // (wgpu binds at most 128 MiB on many adapters), one multi-buffer over them.
    let buft = backend.device().buffer_type();
    let (align, max_size) = (buft.alignment(), buft.max_size());
    let mut chunk_sizes: Vec<usize> = vec![0];
    let mut offsets = HashMap::new();
    for &t in &order {
        let d = ctx.desc(t)?;
        if d.view_src.is_none() {
            let size = buft
                .alloc_size(&d.layout())
                .checked_next_multiple_of(align)
                .ok_or_else(|| Error::Overflow(format!("graph copy of {}", ctx.describe(t))))?;
            if size > max_size {
                return Err(Error::InvalidTensor {
                    tensor: ctx.describe(t),
                    reason: format!(
                        "needs {size} bytes, more than {}'s largest buffer of {max_size} bytes",
                        buft.name()
                    ),
                });
            }
            let last = chunk_sizes.len() - 1;
            if chunk_sizes[last] > 0 && chunk_sizes[last] + size > max_size {
                chunk_sizes.push(0);
            }
            let chunk = chunk_sizes.len() - 1;
            offsets.insert(t, (chunk, chunk_sizes[chunk]));
            chunk_sizes[chunk] += size;
        }
    }
    let buffer = ctx.alloc_multi_buffer(&buft, &chunk_sizes, BufferUsage::Compute)?;
    let chunks = ctx.buffer_chunks(buffer)?.to_vec();
    let mut map = HashMap::new();
    let filled = (|| -> Result<()> {
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
                    let (chunk, offset) = offsets[&t];
                    ctx.place(id, chunks[chunk], offset)?;
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
        Ok(())
    })();
    if let Err(e) = filled {
        for &t in map.values() {
            let _ = ctx.remove(t);
        }
        let _ = ctx.free_buffer(buffer);
        return Err(e);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::testing::TestBufferType;
    use crate::testing::mock_devices::{all_ops, gpu_with};
    use crate::{DType, GraphArena};

    #[test]
    fn a_graph_larger_than_max_size_is_copied_into_a_multi_buffer() {
        let mut ctx = Context::new();
        let host = TestBufferType::host("host", 32).shared();
        let a = ctx.tensor(DType::F32, [40]).unwrap();
        let b = ctx.tensor(DType::F32, [40]).unwrap();
        let s = ctx.add(a, b).unwrap();
        let v = ctx.view_1d(s, 10, 4 * 5).unwrap();
        let y = ctx.neg(v).unwrap();
        ctx.alloc_tensors(&[a, b, s, y], &host, BufferUsage::Any).unwrap();
        ctx.set_f32(a, &(0..40).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
        ctx.set_f32(b, &[0.5; 40]).unwrap();
        ctx.set_f32(s, &[7.0; 40]).unwrap();
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &[y]).unwrap();
        // 160-byte tensors, buffers of at most 200 bytes: one chunk each.
        let small = TestBufferType::device("small", 32).with_max_size(200).shared();
        let gpu = gpu_with("Small", all_ops, small);
        let copy = graph_copy(&mut ctx, graph, gpu.as_ref()).unwrap();
        assert!(ctx.is_multi_buffer(copy.buffer).unwrap());
        let chunks = ctx.buffer_chunks(copy.buffer).unwrap().to_vec();
        assert_eq!(chunks.len(), 4, "a, b, s and y in chunks of their own");
        for t in [a, b, s] {
            let c = copy.copy_of(t).unwrap();
            assert_eq!(ctx.read_f32(c).unwrap(), ctx.read_f32(t).unwrap());
            assert!(chunks.contains(&ctx.placement(c).unwrap().buffer));
        }
        assert_eq!(
            ctx.read_f32(copy.copy_of(v).unwrap()).unwrap(),
            vec![7.0; 10],
            "the view follows its copied source"
        );
        ctx.set_buffer_usage(copy.buffer, BufferUsage::Weights).unwrap();
        assert!(chunks.iter().all(|&c| ctx.buffer(c).unwrap().usage == BufferUsage::Weights), "usage on every chunk");
        ctx.clear_buffer(copy.buffer, 0).unwrap();
        assert_eq!(ctx.read_f32(copy.copy_of(a).unwrap()).unwrap(), vec![0.0; 40], "clear of every chunk");
        let err = ctx.place(a, copy.buffer, 0).unwrap_err().to_string();
        assert!(err.contains("multi-buffer") && err.contains("chunks"), "{err}");
        copy.free(&mut ctx).unwrap();
        assert!(chunks.iter().all(|&c| ctx.buffer(c).is_err()), "freeing the handle frees the chunks");

        // One tensor larger than any buffer: an error naming it, nothing left behind.
        let tiny = gpu_with("Tiny", all_ops, TestBufferType::device("tiny", 32).with_max_size(100).shared());
        let before = ctx.buffers().count();
        let err = graph_copy(&mut ctx, graph, tiny.as_ref()).unwrap_err().to_string();
        assert!(err.contains("tiny") && err.contains("largest buffer"), "{err}");
        assert_eq!(ctx.buffers().count(), before);
    }
}
