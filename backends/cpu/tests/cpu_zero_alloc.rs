//! In steady state a CPU compute allocates nothing: the scratch lives in the
//! backend; nor does reading its output back (`TensorRead`). Allocations are counted on every thread (the pool's included),
//! so this file holds one test, which nothing else runs beside.

use gantry_cpu::{self as cpu, CpuBackend};
use gantry_engine::testing::CountingAllocator;
use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena, RopeMode, RopeParams, TensorId};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// A small transformer-ish graph touching most kernel families, a
/// product of 48 columns (the GEMM, split over the threads, its packed
/// operands in the backend's scratch) and a mixture-of-experts block
/// (routing, expert products grouped in the scratch, biases, sinks): the
/// argmax, the product and the block's output.
fn build(ctx: &mut Context) -> gantry_engine::Result<(Vec<TensorId>, [TensorId; 3])> {
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
    let wide = ctx.tensor(DType::F32, [128, 48])?;
    let w2 = ctx.tensor(DType::F16, [128, 96])?;
    let product = ctx.mul_mat(w2, wide)?;
    let router = ctx.tensor(DType::F32, [64, 4])?;
    let experts = ctx.tensor(DType::Q8_0, [64, 32, 4])?;
    let bias = ctx.tensor(DType::F32, [32, 4])?;
    let sinks = ctx.tensor(DType::F32, [1])?;
    let logits = ctx.mul_mat(router, h)?;
    let ids = ctx.top_k(logits, 2)?;
    let probs = ctx.soft_max_ext_sinks(logits, None, sinks, 1.0, 0.0)?;
    let order = ctx.argsort(probs, gantry_engine::SortOrder::Asc)?;
    let xs = ctx.reshape(h, [64, 1, 4, 1])?;
    let moe = ctx.mul_mat_id(experts, xs, ids)?;
    let moe = ctx.add_id(moe, bias, ids)?;
    let moe = ctx.swiglu_oai_split(moe, moe, 1.702, 7.0)?;
    let moe = ctx.cumsum(moe)?;
    // Each token's experts from least to most likely, their bias rows added up.
    let order = ctx.reshape(order, [16])?;
    let picked = ctx.get_rows(bias, order)?;
    let picked = ctx.reshape(picked, [32, 2, 8, 1])?;
    let moe = ctx.concat(moe, picked, 2)?;
    let inputs = vec![x, w, pos, mask, cache, slots, wide, w2, router, experts, bias, sinks];
    Ok((inputs, [y, product, moe]))
}

fn computing_a_graph_again_allocates_nothing() {
    let backend = CpuBackend::with_threads(2).unwrap();
    let mut ctx = Context::new();
    let (inputs, [out, product, moe]) = build(&mut ctx).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[out, product, moe]).unwrap();
    ctx.alloc_tensors(graph.leafs(), &cpu::buffer_type(), BufferUsage::Weights).unwrap();
    ctx.alloc_tensors(graph.nodes(), &cpu::buffer_type(), BufferUsage::Compute).unwrap();
    for (i, &t) in inputs.iter().enumerate() {
        let n = ctx.desc(t).unwrap().nelements();
        let values: Vec<f32> = (0..n).map(|j| ((i * 31 + j * 7) % 4) as f32).collect();
        ctx.set_f32(t, &values).unwrap();
    }
    assert!(backend.graph_compute(&ctx, graph).is_success(), "first compute");
    let first = (ctx.read_i32(out).unwrap(), ctx.read_f32(product).unwrap(), ctx.read_f32(moe).unwrap());

    for _ in 0..3 {
        let (status, allocations) = CountingAllocator::count_every_thread(|| backend.graph_compute(&ctx, graph));
        assert!(status.is_success());
        assert_eq!(allocations, 0, "heap allocations in a steady-state compute");
    }
    let again = (ctx.read_i32(out).unwrap(), ctx.read_f32(product).unwrap(), ctx.read_f32(moe).unwrap());
    assert_eq!(again, first);
}

/// A decoder-like block through the scheduler with fusion on (RMS_NORM+MUL
/// and three products of one activation fused): once placed, computing it
/// again (from the CPU's graph plan, fused groups and all) allocates nothing;
/// unfused too (quantized products included).
fn fused_groups_compute_without_allocating(fusion: bool) {
    use gantry_engine::sched::{FusionKind, Scheduler, SchedulerParams};
    let cpu: std::sync::Arc<dyn Backend> = std::sync::Arc::new(CpuBackend::with_threads(2).unwrap());
    let mut ctx = Context::new();
    let k = 64;
    let x = ctx.tensor(DType::F32, [k, 1]).unwrap();
    ctx.set_input(x).unwrap();
    let g = ctx.tensor(DType::F32, [k]).unwrap();
    let ws: Vec<TensorId> = [32, 16, 16].iter().map(|&m| ctx.tensor(DType::Q8_0, [k, m]).unwrap()).collect();
    let mut weights = ws.clone();
    weights.push(g);
    ctx.alloc_tensors(&weights, &cpu::buffer_type(), BufferUsage::Weights).unwrap();
    ctx.set_f32(g, &vec![1.5; k]).unwrap();
    for &w in &ws {
        let n = ctx.desc(w).unwrap().nelements();
        let values: Vec<f32> = (0..n).map(|j| ((j * 7) % 5) as f32 * 0.25 - 0.5).collect();
        let row = DType::Q8_0.row_size(k).unwrap();
        let mut bytes = vec![0u8; n / k * row];
        for (src, dst) in values.chunks(k).zip(bytes.chunks_mut(row)) {
            gantry_engine::quant::quantize_row(DType::Q8_0, src, dst).unwrap();
        }
        ctx.write_tensor_bytes(w, 0, &bytes).unwrap();
    }
    let h = ctx.rms_norm(x, 1e-5).unwrap();
    let h = ctx.mul(h, g).unwrap();
    let q = ctx.mul_mat(ws[0], h).unwrap();
    let q = ctx.silu(q).unwrap();
    let kk = ctx.mul_mat(ws[1], h).unwrap();
    let v = ctx.mul_mat(ws[2], h).unwrap();
    let kv = ctx.add(kk, v).unwrap();
    let mut sched =
        Scheduler::new(&[cpu], SchedulerParams { graph_optimize: fusion, ..SchedulerParams::default() }).unwrap();
    let arena = GraphArena::new();
    let both = ctx.concat(q, kv, 0).unwrap();
    let graph = ctx.build_graph(&arena, &[both]).unwrap();
    let input: Vec<u8> = (0..k).flat_map(|i| (i as f32 * 0.01).to_le_bytes()).collect();
    let mut first = Vec::new();
    for round in 0..5 {
        let mut out = vec![0u8; 16 * 4];
        let ((), allocations) = CountingAllocator::count_every_thread(|| {
            sched.alloc_graph(&mut ctx, graph).unwrap();
            ctx.write_tensor_bytes(x, 0, &input).unwrap();
            sched.graph_compute(&mut ctx, graph).unwrap();
            ctx.read_tensor_bytes(kv, 0, &mut out).unwrap();
        });
        if round == 0 {
            first = out;
        } else {
            assert_eq!(out, first, "round {round}");
        }
        if round >= 2 {
            assert_eq!(allocations, 0, "round {round}: heap allocations, fusion {fusion}");
        }
    }
    let kinds: Vec<FusionKind> = sched.split_fused(0).iter().map(|g| g.kind).collect();
    if fusion {
        assert_eq!(kinds, [FusionKind::RmsNormMul, FusionKind::SharedActivation]);
    } else {
        assert!(kinds.is_empty());
    }
}

/// The engine's read that does not block, of a CPU tensor (the default
/// path: read from host memory once the compute has finished): begun,
/// submitted, polled and taken again, it allocates nothing.
fn a_steady_state_read_allocates_nothing() {
    let backend = CpuBackend::with_threads(2).unwrap();
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [256]).unwrap();
    let y = ctx.scale(x, 2.0, 0.0).unwrap();
    ctx.alloc_tensors(&[x, y], &cpu::buffer_type(), BufferUsage::Compute).unwrap();
    ctx.set_f32(x, &[1.5; 256]).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    let mut read = gantry_engine::TensorRead::new();
    let mut out = vec![0f32; 256];
    for round in 0..4 {
        let (result, allocations) = CountingAllocator::count_every_thread(|| -> gantry_engine::Result<()> {
            backend.graph_compute_async(&ctx, graph).into_result()?;
            read.begin(&ctx, y)?;
            backend.synchronize()?;
            read.submit()?;
            while !read.poll()? {}
            read.take_f32(&ctx, &mut out)
        });
        result.unwrap();
        assert_eq!(out, [3.0; 256]);
        if round >= 1 {
            assert_eq!(allocations, 0, "round {round}: heap allocations in a steady-state read");
        }
    }
}

/// Run without libtest's harness (`harness = false`): the harness's own
/// thread allocates while a test starts, which counting every thread would
/// blame on the code under test.
fn main() {
    computing_a_graph_again_allocates_nothing();
    println!("computing_a_graph_again_allocates_nothing: ok");
    fused_groups_compute_without_allocating(false);
    fused_groups_compute_without_allocating(true);
    println!("fused_groups_compute_without_allocating: ok");
    a_steady_state_read_allocates_nothing();
    println!("a_steady_state_read_allocates_nothing: ok");
}
