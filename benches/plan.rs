//! Graph plans against plain `graph_compute` on SmolLM2-135M's decode graph
//! (one token over 256 cache rows, 30 layers, Q4_0 weights with synthetic
//! values, no download), on the CPU backend, side by side in one run:
//!
//! - `smollm2_decode/*`: the real shapes (the kernels' time dominates);
//! - `smollm2_topology_tiny/*`: the same graph (same nodes, same ops) with
//!   every width shrunk to 64 and 8 cache rows, so a compute is almost all
//!   per-call and per-node overhead — what a plan removes.
//!
//! After criterion's report it prints, for both, the mean per call of each
//! path over interleaved rounds, the difference (the per-call overhead a
//! plan saves, in µs) and the ratio.
//!
//! `cargo bench -p gantry --bench plan -- --warm-up-time 1 --measurement-time 5`

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use gantry::backends::cpu::{self, CpuBackend};
use gantry::model::decoder::DecoderHparams;
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::PlannedLlama;
use gantry::{Backend, BufferType, Context, DType, GraphArena, TensorId};

/// SmolLM2's graph with every width 64: the same nodes, almost no work.
const TINY: DecoderHparams = DecoderHparams {
    n_vocab: 64,
    n_embd: 64,
    n_head: 1,
    n_head_kv: 1,
    head_dim: 64,
    n_ff: 64,
    ..DecoderHparams::SMOLLM2_135M
};

struct Setup {
    ctx: Context,
    arena: GraphArena,
    logits: TensorId,
    sched: Scheduler,
}

fn setup(hp: DecoderHparams, n_kv: usize, backend: &Arc<dyn Backend>) -> Setup {
    let mut ctx = Context::new();
    let buft: Arc<dyn BufferType> = cpu::buffer_type();
    let model = PlannedLlama::new(&mut ctx, hp, DType::Q4_0, n_kv, &buft).unwrap();
    let g = model.build(&mut ctx, 1, n_kv).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[g.logits]).unwrap();
    // The scheduler over the CPU alone places the compute memory (one split).
    let mut sched = Scheduler::new(std::slice::from_ref(backend), SchedulerParams::default()).unwrap();
    sched.alloc_graph(&mut ctx, graph).unwrap();
    ctx.set_i32(g.tokens, &[1]).unwrap();
    ctx.set_i32(g.positions, &[n_kv as i32 - 1]).unwrap();
    ctx.set_i32(g.kv_slots, &[n_kv as i32 - 1]).unwrap();
    // A llama's layers are all global: the graph has the global mask.
    if let Some(mask) = g.mask {
        ctx.set_f32(mask, &vec![0.0; n_kv]).unwrap();
    }
    Setup { ctx, arena, logits: g.logits, sched }
}

/// Mean time per call of `f` over `rounds` calls.
fn mean(rounds: u32, mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..rounds {
        f();
    }
    t.elapsed() / rounds
}

fn bench_plan(c: &mut Criterion) {
    let backend: Arc<dyn Backend> = Arc::new(CpuBackend::new().unwrap());
    for (label, hp, n_kv, rounds) in
        [("smollm2_decode", DecoderHparams::SMOLLM2_135M, 256, 20), ("smollm2_topology_tiny", TINY, 8, 400)]
    {
        let mut s = setup(hp, n_kv, &backend);
        let graph = s.ctx.build_graph(&s.arena, &[s.logits]).unwrap();
        let plan = backend.graph_plan_create(&s.ctx, graph).unwrap();
        eprintln!(
            "{label}: {} nodes, CPU backend with {} threads",
            graph.n_nodes(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        let ctx = &s.ctx;
        let mut group = c.benchmark_group(label);
        if label == "smollm2_decode" {
            group.sample_size(20);
        }
        group.bench_function("graph_compute", |b| b.iter(|| backend.graph_compute(ctx, graph).into_result().unwrap()));
        group.bench_function("graph_plan_compute", |b| {
            b.iter(|| backend.graph_plan_compute(ctx, plan).into_result().unwrap())
        });
        group.finish();
        // Interleaved rounds, so both paths see the same machine load.
        let (mut direct, mut planned) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..5 {
            direct += mean(rounds, || backend.graph_compute(ctx, graph).into_result().unwrap());
            planned += mean(rounds, || backend.graph_plan_compute(ctx, plan).into_result().unwrap());
        }
        let (d, p) = (direct.as_secs_f64() * 1e6 / 5.0, planned.as_secs_f64() * 1e6 / 5.0);
        eprintln!(
            "{label}: graph_compute {d:.1} µs, graph_plan_compute {p:.1} µs per call: the plan saves {:.1} µs ({:.3}× the direct time)",
            d - p,
            p / d
        );
        backend.graph_plan_free(plan).unwrap();
        s.sched.release(&mut s.ctx).unwrap();
    }
}

criterion_group!(benches, bench_plan);
criterion_main!(benches);
