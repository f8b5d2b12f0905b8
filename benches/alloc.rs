//! Plan and bind time of the graph allocator on the 30-layer SmolLM2-shaped
//! llama graph (64-token batch over 256 cache rows), per node, beside a
//! baseline that binds every tensor to its own offset with no planning and
//! no reuse (the least any binder can do).
//!
//! `cargo bench -p gantry --bench alloc -- --warm-up-time 1 --measurement-time 3`

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gantry::model::decoder::{DecoderGraph, DecoderHparams};
use gantry::testing::PlannedLlama;
use gantry::testing::engine::TestBufferType;
use gantry::{BufferId, BufferType, BufferUsage, Context, DType, Graph, GraphAllocator, GraphArena, TensorId};

const N_TOKENS: usize = 64;
const N_KV: usize = 256;

/// A context holding the model (weights in virtual memory) and one graph's tensors.
fn llama_context() -> (Context, DecoderGraph, Vec<BufferId>) {
    let mut ctx = Context::new();
    let weights = TestBufferType::virtual_memory("weights", 32).shared();
    let model = PlannedLlama::new(&mut ctx, DecoderHparams::SMOLLM2_135M, DType::F32, N_KV, &weights).unwrap();
    let g = model.build(&mut ctx, N_TOKENS, N_KV).unwrap();
    (ctx, g, model.buffers)
}

/// The baseline: every tensor that needs memory gets the next aligned offset
/// of one buffer (no liveness, no reuse, no re-plan detection).
fn bump_bind(ctx: &mut Context, graph: Graph<'_>, buffer: BufferId, buft: &dyn BufferType) -> usize {
    let mut end = 0;
    for &t in graph.leafs().iter().chain(graph.nodes()) {
        let d = ctx.desc(t).unwrap();
        if d.view_src.is_some() || ctx.is_allocated(t) && ctx.placement(t).unwrap().buffer != buffer {
            continue;
        }
        let size = buft.alloc_size(&d.layout()).next_multiple_of(buft.alignment());
        ctx.place(t, buffer, end).unwrap();
        end += size;
    }
    end
}

fn owned_sum(ctx: &Context, tensors: &[TensorId], weights: &[BufferId]) -> usize {
    tensors
        .iter()
        .filter(|&&t| {
            ctx.desc(t).unwrap().view_src.is_none() && ctx.placement(t).is_none_or(|p| !weights.contains(&p.buffer))
        })
        .map(|&t| ctx.desc(t).unwrap().nbytes())
        .sum()
}

fn bench_alloc(c: &mut Criterion) {
    let compute: Arc<dyn BufferType> = TestBufferType::virtual_memory("compute", 32).shared();

    // The allocator's context.
    let (mut ctx, g, wbuf) = llama_context();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[g.logits]).unwrap();
    let n_nodes = graph.n_nodes();
    let mut alloc = GraphAllocator::new(std::slice::from_ref(&compute));
    alloc.alloc_graph(&mut ctx, graph, &[], &[]).unwrap();
    let all: Vec<TensorId> = graph.leafs().iter().chain(graph.nodes()).copied().collect();
    let sum = owned_sum(&ctx, &all, &wbuf);
    let peak = alloc.buffer_size(gantry::alloc::BufferTypeIndex::new(0));
    eprintln!(
        "llama 30 layers, {N_TOKENS} tokens over {N_KV} cache rows: {n_nodes} nodes, {} leafs; \
         planned peak {:.2} MiB vs sum of all tensor sizes {:.2} MiB ({:.1}x less)",
        graph.leafs().len(),
        peak as f64 / (1 << 20) as f64,
        sum as f64 / (1 << 20) as f64,
        sum as f64 / peak as f64
    );

    // The baseline's context (its tensors must not be in the allocator's buffers).
    let (mut bctx, bg, _) = llama_context();
    let barena = GraphArena::new();
    let bgraph = bctx.build_graph(&barena, &[bg.logits]).unwrap();
    let bbuf = bctx.alloc_buffer(&compute, 1 << 30, BufferUsage::Compute).unwrap();

    let mut group = c.benchmark_group("alloc/llama30_64tok");
    group.throughput(Throughput::Elements(n_nodes as u64));
    group.bench_function("baseline: bump bind, no plan, no reuse", |b| {
        b.iter(|| bump_bind(&mut bctx, bgraph, bbuf, compute.as_ref()))
    });
    group.bench_function("alloc_graph: same graph, bind only", |b| {
        b.iter(|| alloc.alloc_graph(&mut ctx, graph, &[], &[]).unwrap())
    });
    group.bench_function("alloc_graph: plan + bind", |b| {
        b.iter(|| {
            alloc.forget_plan();
            alloc.alloc_graph(&mut ctx, graph, &[], &[]).unwrap()
        })
    });
    group.bench_function("plan: dry run", |b| b.iter(|| alloc.plan(&ctx, graph, &[], &[]).unwrap()));
    group.finish();
}

criterion_group!(benches, bench_alloc);
criterion_main!(benches);
