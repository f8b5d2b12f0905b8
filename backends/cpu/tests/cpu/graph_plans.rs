//! Graph plans on the CPU backend, by themselves and under the scheduler:
//! a plan computes what `graph_compute` computes, sees new input data,
//! follows a context that changed (re-placed tensors), is updated to
//! another graph, and fails with errors that name the node or the plan.

use std::sync::Arc;

use gantry_cpu::{self as cpu, CpuBackend};
use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::{Backend, BufferUsage, ComputeStatus, Context, DType, GraphArena, TensorId};

fn alloc(ctx: &mut Context, ts: &[TensorId]) {
    ctx.alloc_tensors(ts, &cpu::buffer_type(), BufferUsage::Any).unwrap();
}

/// `y = silu(w · x) + b` with a Q4_0 weight (the quantized driver and its
/// work buffer) and a view in between.
fn small_net(ctx: &mut Context) -> (TensorId, TensorId, TensorId) {
    let w = ctx.tensor(DType::F32, [64, 32]).unwrap();
    let x = ctx.tensor(DType::F32, [64, 3]).unwrap();
    let b = ctx.tensor(DType::F32, [32]).unwrap();
    let wq = ctx.tensor(DType::Q4_0, [64, 32]).unwrap();
    let wq_in = ctx.cpy(w, wq).unwrap();
    let y = ctx.mul_mat(wq_in, x).unwrap();
    let y = ctx.silu(y).unwrap();
    let y = ctx.add(y, b).unwrap();
    let y = ctx.reshape(y, [96]).unwrap();
    let y = ctx.scale(y, 0.5, 0.0).unwrap();
    let all: Vec<TensorId> = ctx.tensors().map(|(t, _)| t).collect();
    let owners: Vec<TensorId> = all.into_iter().filter(|&t| ctx.desc(t).unwrap().view_src.is_none()).collect();
    alloc(ctx, &owners);
    ctx.set_f32(w, &gantry_engine::SplitMix64::new(1).values(64 * 32, -1.0, 1.0)).unwrap();
    ctx.set_f32(b, &gantry_engine::SplitMix64::new(2).values(32, -1.0, 1.0)).unwrap();
    (x, y, b)
}

#[test]
fn a_plan_computes_what_graph_compute_computes_with_new_data_each_time() {
    let backend = CpuBackend::with_threads(2).unwrap();
    assert!(backend.supports_graph_plans());
    let mut ctx = Context::new();
    let (x, y, _) = small_net(&mut ctx);
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    let plan = backend.graph_plan_create(&ctx, graph).unwrap();
    for seed in 0..3 {
        ctx.set_f32(x, &gantry_engine::SplitMix64::new(10 + seed).values(64 * 3, -1.0, 1.0)).unwrap();
        backend.graph_compute(&ctx, graph).into_result().unwrap();
        let want = ctx.read_f32(y).unwrap();
        ctx.fill_tensor_bytes(y, 0, 96 * 4, 0).unwrap();
        backend.graph_plan_compute(&ctx, plan).into_result().unwrap();
        assert_eq!(ctx.read_f32(y).unwrap(), want, "seed {seed}: the plan reads this compute's input");
    }
    backend.graph_plan_free(plan).unwrap();
}

#[test]
fn a_plan_follows_a_changed_context_and_an_update() {
    let backend = CpuBackend::with_threads(2).unwrap();
    let mut ctx = Context::new();
    let (x, y, b) = small_net(&mut ctx);
    ctx.set_f32(x, &vec![0.25; 64 * 3]).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    let plan = backend.graph_plan_create(&ctx, graph).unwrap();
    backend.graph_plan_compute(&ctx, plan).into_result().unwrap();
    let first = ctx.read_f32(y).unwrap();

    // The bias moves to a new buffer (the context's revision changes): the
    // plan checks its nodes again and reads it there.
    let bias = ctx.read_f32(b).unwrap();
    alloc(&mut ctx, &[b]);
    ctx.set_f32(b, &bias.iter().map(|v| v + 1.0).collect::<Vec<_>>()).unwrap();
    backend.graph_plan_compute(&ctx, plan).into_result().unwrap();
    let moved = ctx.read_f32(y).unwrap();
    for (m, f) in moved.iter().zip(&first) {
        assert!((m - (f + 0.5)).abs() < 1e-5, "{m} vs {f} + 0.5");
    }

    // Updated to another graph: y2 = neg(x).
    let x2 = ctx.tensor(DType::F32, [4]).unwrap();
    let y2 = ctx.neg(x2).unwrap();
    alloc(&mut ctx, &[x2, y2]);
    ctx.set_f32(x2, &[1.0, -2.0, 3.0, -4.0]).unwrap();
    let arena2 = GraphArena::new();
    let graph2 = ctx.build_graph(&arena2, &[y2]).unwrap();
    backend.graph_plan_update(&ctx, plan, graph2).unwrap();
    backend.graph_plan_compute(&ctx, plan).into_result().unwrap();
    assert_eq!(ctx.read_f32(y2).unwrap(), [-1.0, 2.0, -3.0, 4.0]);
    backend.graph_plan_free(plan).unwrap();
}

#[test]
fn plan_errors_name_the_node_or_the_plan() {
    let backend = CpuBackend::with_threads(1).unwrap();
    let other = CpuBackend::with_threads(1).unwrap();
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [4]).unwrap();
    let y = ctx.neg(a).unwrap();
    ctx.set_name(y, "unplaced").unwrap();
    alloc(&mut ctx, &[a]);
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    let err = backend.graph_plan_create(&ctx, graph).unwrap_err().to_string();
    assert!(err.contains("'unplaced'") && err.contains("NEG"), "{err}");

    alloc(&mut ctx, &[y]);
    let plan = backend.graph_plan_create(&ctx, graph).unwrap();
    match other.graph_plan_compute(&ctx, plan) {
        ComputeStatus::Failed(e) => assert!(e.to_string().contains("graph plan"), "{e}"),
        s => panic!("another backend's plan computed: {s:?}"),
    }
    // The tensor's memory goes away: the plan notices instead of computing.
    let buffer = ctx.placement(y).unwrap().buffer;
    ctx.free_buffer(buffer).unwrap();
    match backend.graph_plan_compute(&ctx, plan) {
        ComputeStatus::Failed(e) => assert!(e.to_string().contains("'unplaced'"), "{e}"),
        s => panic!("computed into freed memory: {s:?}"),
    }
    backend.graph_plan_free(plan).unwrap();
    assert!(backend.graph_plan_free(plan).is_err(), "a freed plan is stale");
}

#[test]
fn the_scheduler_runs_an_unchanged_split_from_its_plan() {
    let backend: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let mut ctx = Context::new();
    let (x, y, _) = small_net(&mut ctx);
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    let mut sched = Scheduler::new(std::slice::from_ref(&backend), SchedulerParams::default()).unwrap();
    let mut results = Vec::new();
    for step in 0..4 {
        ctx.set_f32(x, &vec![0.1 * step as f32; 64 * 3]).unwrap();
        sched.graph_compute(&mut ctx, graph).unwrap();
        results.push(ctx.read_f32(y).unwrap());
        let want_plans = if step == 0 { 0 } else { sched.n_splits() };
        assert_eq!(sched.graph_plans_live(), want_plans, "step {step}: plans from the second compute on");
    }
    // The plan computed what a direct compute does.
    backend.graph_compute(&ctx, graph).into_result().unwrap();
    assert_eq!(ctx.read_f32(y).unwrap(), results[3]);
    assert_ne!(results[1], results[2], "each step read its own input");
    // A changed context places again and drops the plans.
    ctx.set_name(y, "renamed").unwrap();
    sched.alloc_graph(&mut ctx, graph).unwrap();
    assert_eq!(sched.graph_plans_live(), 0);
    sched.release(&mut ctx).unwrap();
}
