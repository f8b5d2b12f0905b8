//! Scheduler overhead: reset + split + alloc per node on the 30-layer
//! llama-shaped graph (SmolLM2's shapes), over a test GPU (placement only,
//! virtual memory) and the CPU, with the graph allocator's bind alone (the
//! floor any scheduler pays) side by side.
//!
//! `reset_split_alloc` places the graph from scratch on every iteration (the
//! context is touched in between, as when a model changes anything);
//! `reset_alloc_same_graph` allocates the same graph in an untouched context,
//! which keeps its placement (what a decode loop over one graph does).
//!
//! ggml's side is `scripts/sched_vs_ggml` (a C driver placing the same
//! 934-node shape over a test GPU and the CPU with
//! `ggml_backend_sched_reset` + `ggml_backend_sched_alloc_graph`), run in
//! the same sitting; `examples/sched_from_scratch.rs` times the first case
//! the way the driver does and is what callgrind counts. On the 2-core AMD
//! EPYC (Zen 4, AVX-512) development machine, 2026-12-03, interleaved runs
//! of 40 × 200 placements: Gantry 57–63 µs best (61–67 ns per node), ggml
//! d99724f2 73–79 µs (79–85 ns per node, `-march=native` or not); this
//! bench's `reset_split_alloc/gpu_cpu` 72–93 µs in noisier sittings.
//! Callgrind: 0.97 M instructions per placement (1,035 per node) against
//! ggml's 1.17 M (1,255 per node), with half its first-level data-cache
//! read misses. The goal: at most 100 ns per node, and no slower than ggml,
//! with zero allocations.

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gantry::alloc::GraphAllocator;
use gantry::model::decoder::DecoderHparams;
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::PlannedLlama;
use gantry::testing::engine::TestBufferType;
use gantry::testing::engine::mock_devices::{all_ops, cpu, gpu_with};
use gantry::{BufferType, Context, DType, GraphArena, Op};

/// A GPU without SOFT_MAX: every layer's attention goes GPU -> CPU -> GPU.
fn no_soft_max(op: &Op) -> bool {
    !matches!(op, Op::SoftMax { .. })
}

fn bench_sched(c: &mut Criterion) {
    for (label, n_tokens, n_kv) in [("prompt64", 64, 256), ("decode1", 1, 256)] {
        let mut ctx = Context::new();
        let vram: Arc<dyn BufferType> = TestBufferType::virtual_memory("TestGPU", 256).shared();
        let model = PlannedLlama::new(&mut ctx, DecoderHparams::SMOLLM2_135M, DType::Q4_0, 256, &vram).unwrap();
        let g = model.build(&mut ctx, n_tokens, n_kv).unwrap();
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &[g.logits]).unwrap();
        let n_nodes = graph.n_nodes();

        let mut group = c.benchmark_group(format!("sched_{label}_{n_nodes}_nodes"));
        group.throughput(Throughput::Elements(n_nodes as u64));
        for (name, supports) in [("gpu_cpu", all_ops as fn(&Op) -> bool), ("gpu_cpu_split", no_soft_max)] {
            let backends = [gpu_with("TestGPU", supports, vram.clone()), cpu()];
            let mut sched = Scheduler::new(&backends, SchedulerParams::default()).unwrap();
            sched.reserve(&mut ctx, graph).unwrap();
            sched.alloc_graph(&mut ctx, graph).unwrap();
            eprintln!("{label}/{name}: {n_nodes} nodes, {} splits", sched.n_splits());
            // Placed from scratch every time: a rename bumps the context's
            // revision, so assign, expand, split and the allocator's gather,
            // compare and bind all run (the plan itself is reused).
            let first = graph.nodes()[0];
            let name_of_first = ctx.name(first).to_owned();
            group.bench_function(format!("reset_split_alloc/{name}"), |b| {
                b.iter(|| {
                    ctx.set_name(first, &name_of_first).unwrap();
                    sched.reset(&mut ctx);
                    sched.alloc_graph(&mut ctx, graph).unwrap();
                })
            });
            // The same graph in an untouched context: the placement is kept.
            let placed_before = sched.placements_computed();
            group.bench_function(format!("reset_alloc_same_graph/{name}"), |b| {
                b.iter(|| {
                    sched.reset(&mut ctx);
                    sched.alloc_graph(&mut ctx, graph).unwrap();
                })
            });
            assert_eq!(sched.placements_computed(), placed_before, "the placement was kept");
            sched.release(&mut ctx).unwrap();
        }
        // The floor: binding the same graph with the allocator alone.
        let bufts: Vec<Arc<dyn BufferType>> = vec![vram.clone()];
        let mut alloc = GraphAllocator::new(&bufts);
        alloc.alloc_graph(&mut ctx, graph, &[], &[]).unwrap();
        group.bench_function("allocator_bind_only", |b| {
            b.iter(|| alloc.alloc_graph(&mut ctx, graph, &[], &[]).unwrap())
        });
        group.finish();
    }
}

criterion_group!(benches, bench_sched);
criterion_main!(benches);
