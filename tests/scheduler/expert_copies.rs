//! The scheduler knows experts: a mixture-of-experts product whose expert
//! weights live in host memory and which a GPU asks for (op offload of a
//! large batch) gets only the experts its tokens chose copied in, as ggml's
//! scheduler does it, with the result the CPU's.

use std::sync::Arc;

use gantry::backends::cpu::{self, CpuBackend};
use gantry::profile::{Profiler, SliceKind};
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::backends::{SupportFn, TestGpuDevice};
use gantry::testing::fill;
use gantry::{Backend, BufferUsage, Context, DType, GraphArena, TensorId};

const K: usize = 32;
const M: usize = 16;
const N_EXPERT: usize = 8;
const N_USED: usize = 2;
const N_TOKENS: usize = 4;
/// Bytes of one F32 expert matrix.
const EXPERT_BYTES: usize = K * M * 4;

fn all_ops() -> SupportFn {
    Arc::new(|_| true)
}

/// Expert weights in a CPU weights buffer, activations, and the product;
/// the ids are an input when `ids_from_router` is off, else the top-2 of a
/// router product computed in the graph.
struct Moe {
    experts: TensorId,
    x: TensorId,
    ids_input: Option<TensorId>,
    /// The router's logits and the ids (router graphs only).
    routed: Option<(TensorId, TensorId)>,
    out: TensorId,
}

fn build(ctx: &mut Context, ids_from_router: bool) -> Moe {
    let experts = ctx.tensor(DType::F32, [K, M, N_EXPERT]).unwrap();
    ctx.set_name(experts, "ffn_up_exps").unwrap();
    let router = ctx.tensor(DType::F32, [K, N_EXPERT]).unwrap();
    let x = ctx.tensor(DType::F32, [K, N_TOKENS]).unwrap();
    ctx.set_input(x).unwrap();
    let (ids, ids_input, routed) = if ids_from_router {
        let logits = ctx.mul_mat(router, x).unwrap();
        let ids = ctx.top_k(logits, N_USED).unwrap();
        (ids, None, Some((logits, ids)))
    } else {
        let ids = ctx.tensor(DType::I32, [N_USED, N_TOKENS]).unwrap();
        ctx.set_input(ids).unwrap();
        (ids, Some(ids), None)
    };
    let x3 = ctx.reshape(x, [K, 1, N_TOKENS]).unwrap();
    let out = ctx.mul_mat_id(experts, x3, ids).unwrap();
    ctx.set_output(out).unwrap();
    ctx.alloc_tensors(&[experts, router], &cpu::buffer_type(), BufferUsage::Weights).unwrap();
    fill(ctx, experts, 3, 1.0).unwrap();
    fill(ctx, router, 4, 1.0).unwrap();
    Moe { experts, x, ids_input, routed, out }
}

/// The ids of `build` without a router: experts 1, 2 and 5 only.
const CHOSEN: [f32; N_USED * N_TOKENS] = [1.0, 5.0, 2.0, 1.0, 5.0, 2.0, 1.0, 2.0];

/// Runs the graph under `sched`; the output and the bytes copied into the
/// split for the expert weights.
fn run(sched: &mut Scheduler, ctx: &mut Context, moe: &Moe, profiler: &Arc<Profiler>) -> (Vec<f32>, Vec<u64>) {
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[moe.out]).unwrap();
    sched.alloc_graph(ctx, graph).unwrap();
    fill(ctx, moe.x, 5, 1.0).unwrap();
    if let Some(ids) = moe.ids_input {
        ctx.set_f32(ids, &CHOSEN).unwrap();
    }
    sched.graph_compute(ctx, graph).unwrap();
    let mut slices = Vec::new();
    profiler.drain(&mut slices);
    let copied = slices
        .iter()
        .filter(|s| s.kind == SliceKind::Copy && s.name.as_str().starts_with("ffn_up_exps"))
        .map(|s| s.bytes)
        .collect();
    (ctx.read_f32(moe.out).unwrap(), copied)
}

/// The product on the CPU alone.
fn on_the_cpu(ids_from_router: bool) -> Vec<f32> {
    let mut ctx = Context::new();
    let moe = build(&mut ctx, ids_from_router);
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let mut sched = Scheduler::new(&[cpu], SchedulerParams::default()).unwrap();
    run(&mut sched, &mut ctx, &moe, &Profiler::new(1 << 10)).0
}

fn offloading_gpu_and_cpu() -> (TestGpuDevice, Scheduler, Arc<Profiler>) {
    let gpu_dev = TestGpuDevice::new("TestGPU", all_ops()).with_offload(2);
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let mut sched = Scheduler::new(&[gpu_dev.backend(), cpu], SchedulerParams::default()).unwrap();
    let profiler = Profiler::new(1 << 12);
    sched.set_profiler(Some(profiler.clone()));
    (gpu_dev, sched, profiler)
}

#[test]
fn only_the_chosen_experts_are_copied_to_the_gpu() {
    let want = on_the_cpu(false);
    let (_gpu, mut sched, profiler) = offloading_gpu_and_cpu();
    let mut ctx = Context::new();
    let moe = build(&mut ctx, false);
    for round in 0..3 {
        let (got, copied) = run(&mut sched, &mut ctx, &moe, &profiler);
        assert_eq!(sched.tensor_backend(moe.out).unwrap().name(), "TestGPU", "the batch of 4 is offloaded");
        assert_eq!(got, want, "round {round}");
        // Experts 1 and 2 in one write, 5 in another: 3 of the 8.
        assert_eq!(copied, [3 * EXPERT_BYTES as u64], "round {round}");
    }
    assert_eq!(ctx.desc(moe.experts).unwrap().nbytes(), N_EXPERT * EXPERT_BYTES);
}

#[test]
fn ids_a_router_made_on_the_gpu_are_read_back_first() {
    let want = on_the_cpu(true);
    let (_gpu, mut sched, profiler) = offloading_gpu_and_cpu();
    let mut ctx = Context::new();
    let moe = build(&mut ctx, true);
    let (_, ids) = moe.routed.unwrap();
    // An offloaded product starts a split of its own (as in ggml, so the
    // copies of offloaded weights can share memory): the router's split
    // before it made the ids, which are read back before the copy.
    ctx.set_output(ids).unwrap();
    let (got, copied) = run(&mut sched, &mut ctx, &moe, &profiler);
    assert_eq!(sched.tensor_backend(ids).unwrap().name(), "TestGPU");
    assert_eq!(sched.tensor_backend(moe.out).unwrap().name(), "TestGPU");
    assert_eq!(got, want);
    let mut chosen = [false; N_EXPERT];
    let mut bytes = vec![0u8; N_USED * N_TOKENS * 4];
    ctx.read_tensor_bytes(ids, 0, &mut bytes).unwrap();
    for id in bytes.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])) {
        chosen[id as usize] = true;
    }
    let n_chosen = chosen.iter().filter(|&&c| c).count();
    assert!(n_chosen < N_EXPERT, "the test wants some expert left out");
    assert_eq!(copied, [(n_chosen * EXPERT_BYTES) as u64]);
}

#[test]
fn an_expert_id_out_of_range_is_still_the_kernels_error() {
    let (_gpu, mut sched, _profiler) = offloading_gpu_and_cpu();
    let mut ctx = Context::new();
    let moe = build(&mut ctx, false);
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[moe.out]).unwrap();
    sched.alloc_graph(&mut ctx, graph).unwrap();
    fill(&mut ctx, moe.x, 5, 1.0).unwrap();
    let mut bad = CHOSEN;
    bad[3] = N_EXPERT as f32;
    ctx.set_f32(moe.ids_input.unwrap(), &bad).unwrap();
    let err = sched.graph_compute(&mut ctx, graph).unwrap_err().to_string();
    assert!(err.contains("MUL_MAT_ID") && err.contains("outside the 8 experts"), "{err}");
}
