//! `compare_backends` (ggml's `ggml_backend_compare_graph_backend`): the
//! CPU against itself node by node, and a callback that stops early.

use gantry_cpu::{self as cpu, CpuBackend};
use gantry_engine::sched::compare_backends;
use gantry_engine::{BufferUsage, Context, DType, GraphArena};

#[test]
fn every_computed_node_is_compared_until_the_callback_stops() {
    let (b1, b2) = (CpuBackend::with_threads(1).unwrap(), CpuBackend::with_threads(2).unwrap());
    let mut ctx = Context::new();
    let w = ctx.tensor(DType::F32, [16, 8]).unwrap();
    let x = ctx.tensor(DType::F32, [16, 2]).unwrap();
    let h = ctx.mul_mat(w, x).unwrap();
    let h = ctx.silu(h).unwrap();
    let t = ctx.transpose(h).unwrap();
    let y = ctx.cont(t).unwrap();
    ctx.alloc_tensors(&[w, x], &cpu::buffer_type(), BufferUsage::Weights).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    let owners: Vec<_> = graph.nodes().iter().copied().filter(|&n| ctx.desc(n).unwrap().view_src.is_none()).collect();
    ctx.alloc_tensors(&owners, &cpu::buffer_type(), BufferUsage::Compute).unwrap();
    ctx.set_f32(w, &gantry_engine::SplitMix64::new(5).values(128, -1.0, 1.0)).unwrap();
    ctx.set_f32(x, &gantry_engine::SplitMix64::new(6).values(32, -1.0, 1.0)).unwrap();
    let buffers_before = ctx.buffers().count();

    let mut seen = Vec::new();
    compare_backends(&mut ctx, graph, &b1, &b2, |ctx, i, n1, n2| {
        assert_ne!(n1, n2, "node {i} is compared with its copy");
        let (a, b) = (ctx.read_f32(n1).unwrap(), ctx.read_f32(n2).unwrap());
        assert_eq!(a, b, "node {i}: both backends computed the same");
        assert!(a.iter().any(|&v| v != 0.0), "node {i} was computed");
        seen.push(i);
        true
    })
    .unwrap();
    let computing: Vec<usize> =
        (0..graph.n_nodes()).filter(|&i| !ctx.desc(graph.nodes()[i]).unwrap().op.is_empty()).collect();
    assert_eq!(seen, computing, "every node that computes, the transpose view skipped");
    assert_eq!(ctx.buffers().count(), buffers_before, "the copy was freed");

    let mut calls = 0;
    compare_backends(&mut ctx, graph, &b1, &b2, |_, _, _, _| {
        calls += 1;
        false
    })
    .unwrap();
    assert_eq!(calls, 1, "false stops the comparison");
}
