//! Re-allocating a graph makes zero heap allocations once the allocator's
//! scratch has grown to the graph: binding the same graph again, binding a
//! rebuilt copy of it, and re-planning other graphs that fit the reservation.

use gantry::model::decoder::DecoderHparams;
use gantry::testing::PlannedLlama;
use gantry::testing::engine::{CountingAllocator, TestBufferType};
use gantry::{Context, DType, GraphAllocator, GraphArena};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations() -> usize {
    CountingAllocator::this_thread()
}

/// A smaller llama (8 layers, real SmolLM2 widths) keeps the debug-build test quick.
const SHAPE: DecoderHparams = DecoderHparams { n_layer: 8, ..DecoderHparams::SMOLLM2_135M };

#[test]
fn alloc_same_graph_again_allocates_nothing() {
    let mut ctx = Context::new();
    let weights = TestBufferType::virtual_memory("weights", 32).shared();
    let model = PlannedLlama::new(&mut ctx, SHAPE, DType::F16, 128, &weights).unwrap();
    let compute = TestBufferType::virtual_memory("compute", 32).shared();
    let mut alloc = GraphAllocator::new(&[compute]);
    let mark = ctx.mark();
    let mut arena = GraphArena::new();
    for round in 0..4 {
        // Rebuild the graph from new tensors each round (they reuse the same slots).
        ctx.rewind(mark);
        arena.reset();
        let g = model.build(&mut ctx, 32, 128).unwrap();
        let graph = ctx.build_graph(&arena, &[g.logits]).unwrap();
        let before = allocations();
        alloc.alloc_graph(&mut ctx, graph, &[], &[]).unwrap();
        let made = allocations() - before;
        if round >= 1 {
            assert_eq!(made, 0, "round {round}: binding a rebuilt graph made {made} heap allocations");
        }
        let before = allocations();
        alloc.alloc_graph(&mut ctx, graph, &[], &[]).unwrap();
        assert_eq!(allocations() - before, 0, "round {round}: binding the same graph again allocated");
        assert!(ctx.is_allocated(g.logits));
    }
    assert_eq!(alloc.plans_computed(), 1, "a rebuilt graph of the same structure reuses the plan");
}

#[test]
fn alloc_replanning_graphs_that_fit_the_reservation_allocates_nothing() {
    let mut ctx = Context::new();
    let weights = TestBufferType::virtual_memory("weights", 32).shared();
    let model = PlannedLlama::new(&mut ctx, SHAPE, DType::F16, 256, &weights).unwrap();
    let compute = TestBufferType::virtual_memory("compute", 32).shared();
    let mut alloc = GraphAllocator::new(&[compute]);
    let mark = ctx.mark();
    let mut arena = GraphArena::new();
    // Reserve for the largest graph, then alternate between shapes: each is a new plan.
    let g = model.build(&mut ctx, 64, 256).unwrap();
    let graph = ctx.build_graph(&arena, &[g.logits]).unwrap();
    alloc.reserve(&mut ctx, graph, &[], &[]).unwrap();
    let shapes = [(64, 256), (16, 128), (64, 192), (8, 64)];
    let mut previous = (64, 256);
    for round in 0..3 {
        for &(n_tokens, n_kv) in &shapes {
            ctx.rewind(mark);
            arena.reset();
            let g = model.build(&mut ctx, n_tokens, n_kv).unwrap();
            let graph = ctx.build_graph(&arena, &[g.logits]).unwrap();
            let plans = alloc.plans_computed();
            let before = allocations();
            alloc.alloc_graph(&mut ctx, graph, &[], &[]).unwrap();
            let made = allocations() - before;
            if round >= 1 {
                assert_eq!(made, 0, "{n_tokens} tokens over {n_kv}: re-planning made {made} heap allocations");
            }
            let replanned = (n_tokens, n_kv) != previous;
            assert_eq!(
                alloc.plans_computed(),
                plans + u64::from(replanned),
                "only a graph of other sizes is planned again"
            );
            previous = (n_tokens, n_kv);
        }
    }
}
