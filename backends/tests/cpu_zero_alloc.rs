//! In steady state a CPU compute allocates nothing: the scratch lives in the
//! backend. Allocations are counted on every thread (the pool's included),
//! so this file holds one test, which nothing else runs beside.

use gantry_backends::cpu::{self, CpuBackend};
use gantry_engine::testing::CountingAllocator;
use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena, RopeMode, RopeParams, TensorId};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// A small transformer-ish graph touching most kernel families.
fn build(ctx: &mut Context) -> gantry_engine::Result<(Vec<TensorId>, TensorId)> {
    let x = ctx.tensor(DType::F32, [64, 4])?;
    let w = ctx.tensor(DType::F16, [64, 64])?;
    let pos = ctx.tensor(DType::I32, [4])?;
    let mask = ctx.tensor(DType::F16, [4, 4])?;
    let cache = ctx.tensor(DType::F16, [64, 8])?;
    let slots = ctx.tensor(DType::I32, [4])?;
    let h = ctx.rms_norm(x, 1e-5)?;
    let q = ctx.mul_mat(w, h)?;
    let q = ctx.reshape(q, [16, 4, 4])?;
    let q = ctx.rope(q, pos, None, RopeParams::new(16, RopeMode::Neox, 10000.0))?;
    let qp = ctx.permute(q, [0, 2, 1, 3])?;
    let k = ctx.cont(qp)?;
    let kq = ctx.mul_mat(k, qp)?;
    let kq = ctx.soft_max_ext(kq, Some(mask), 0.25, 0.0)?;
    let kq = ctx.sum_rows(kq)?;
    let kq = ctx.reshape(kq, [4, 4])?;
    let q2 = ctx.reshape(q, [64, 4])?;
    let stored = ctx.set_rows(cache, q2, slots)?;
    let kv = ctx.view_3d(stored, [16, 4, 4], 16 * 2, 16 * 2 * 4, 0)?;
    let fa = ctx.flash_attn_ext(qp, kv, kv, None, 0.25, 0.0, 0.0)?;
    let fa = ctx.reshape(fa, [64, 4])?;
    let y = ctx.add(fa, x)?;
    let y = ctx.swiglu(y)?;
    let y = ctx.scale(y, 1.0, 0.0)?;
    let y = ctx.mul(y, kq)?;
    let y = ctx.concat(y, y, 0)?;
    let y = ctx.argmax(y)?;
    Ok((vec![x, w, pos, mask, cache, slots], y))
}

#[test]
fn computing_a_graph_again_allocates_nothing() {
    let backend = CpuBackend::with_threads(2).unwrap();
    let mut ctx = Context::new();
    let (inputs, out) = build(&mut ctx).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[out]).unwrap();
    ctx.alloc_tensors(graph.leafs(), &cpu::buffer_type(), BufferUsage::Weights).unwrap();
    ctx.alloc_tensors(graph.nodes(), &cpu::buffer_type(), BufferUsage::Compute).unwrap();
    for (i, &t) in inputs.iter().enumerate() {
        let n = ctx.desc(t).unwrap().nelements();
        let values: Vec<f32> = (0..n).map(|j| ((i * 31 + j * 7) % 4) as f32).collect();
        ctx.set_f32(t, &values).unwrap();
    }
    assert!(backend.graph_compute(&ctx, graph).is_success(), "first compute");
    let first = ctx.read_i32(out).unwrap();

    for _ in 0..3 {
        let (status, allocations) = CountingAllocator::count_every_thread(|| backend.graph_compute(&ctx, graph));
        assert!(status.is_success());
        assert_eq!(allocations, 0, "heap allocations in a steady-state compute");
    }
    assert_eq!(ctx.read_i32(out).unwrap(), first);
}
