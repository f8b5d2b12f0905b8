//! Scheduler overhead: reset + split + alloc per node on the 30-layer
//! llama-shaped graph (SmolLM2's shapes), over a test GPU (placement only,
//! virtual memory) and the CPU, with the graph allocator's bind alone (the
//! floor any scheduler pays) side by side.
//!
//! ggml's `ggml_backend_sched_reset` + `ggml_backend_sched_alloc_graph` take
//! about 200 ns per node on this machine (608 nodes: 117–150 µs; 2432 nodes:
//! 490 µs); the goal is under 70 ns per node with zero allocations.

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gantry_engine::alloc::GraphAllocator;
use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::testing::devices::{all_ops, cpu, gpu_with};
use gantry_engine::testing::{LlamaModel, LlamaShape, VirtualBufferType};
use gantry_engine::{BufferType, Context, DType, GraphArena, Op};

/// A GPU without SOFT_MAX: every layer's attention goes GPU -> CPU -> GPU.
fn no_soft_max(op: &Op) -> bool {
    !matches!(op, Op::SoftMax { .. })
}

fn bench_sched(c: &mut Criterion) {
    for (label, n_tokens, n_kv) in [("prompt64", 64, 256), ("decode1", 1, 256)] {
        let mut ctx = Context::new();
        let model = LlamaModel::new(&mut ctx, LlamaShape::SMOLLM2_135M, DType::Q4_0, 256).unwrap();
        let vram: Arc<dyn BufferType> = Arc::new(VirtualBufferType::new("TestGPU", 256));
        model.place_weights(&mut ctx, &vram).unwrap();
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
            group.bench_function(format!("reset_split_alloc/{name}"), |b| {
                b.iter(|| {
                    sched.reset(&mut ctx);
                    sched.alloc_graph(&mut ctx, graph).unwrap();
                })
            });
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
