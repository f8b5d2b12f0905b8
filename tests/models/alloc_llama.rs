//! The allocator on the 30-layer SmolLM2-shaped llama graph: no live overlap
//! (checked from the graph), and the planned peak against the sum of all
//! tensor sizes (printed; run with `--nocapture` to see it).

use gantry::alloc::BufferTypeIndex;
use gantry::model::decoder::DecoderHparams;
use gantry::testing::PlannedLlama;
use gantry::testing::engine::{TestBufferType, liveness};
use gantry::{Context, DType, GraphAllocator, GraphArena};

#[test]
fn alloc_llama_plan_has_no_live_overlap_and_a_small_peak() {
    let (n_tokens, n_kv) = (64, 256);
    let mut ctx = Context::new();
    let weights_type = TestBufferType::virtual_memory("weights", 32).shared();
    let model = PlannedLlama::new(&mut ctx, DecoderHparams::SMOLLM2_135M, DType::F32, n_kv, &weights_type).unwrap();
    let weight_spots: Vec<_> = model.tensors().iter().map(|&t| ctx.placement(t)).collect();
    let g = model.build(&mut ctx, n_tokens, n_kv).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[g.logits]).unwrap();

    let compute_type = TestBufferType::virtual_memory("compute", 32).shared();
    let mut alloc = GraphAllocator::new(&[compute_type]);
    let sizes = alloc.reserve(&mut ctx, graph, &[], &[]).unwrap();
    alloc.alloc_graph(&mut ctx, graph, &[], &[]).unwrap();
    let in_place = liveness::check_no_live_overlap(&ctx, graph).unwrap();
    let now: Vec<_> = model.tensors().iter().map(|&t| ctx.placement(t)).collect();
    assert_eq!(now, weight_spots, "weights and caches stay where they were placed");

    let peak = alloc.buffer_size(BufferTypeIndex::new(0));
    let sum = liveness::owned_bytes(&ctx, graph, &model.buffers);
    let logits = ctx.desc(g.logits).unwrap().nbytes();
    println!(
        "llama {} layers, {n_tokens} tokens, n_kv {n_kv}: {} nodes, {} leafs; planned peak {:.2} MiB \
         ({} chunk) vs sum of all tensor sizes {:.2} MiB ({:.1}x less); {in_place} nodes computed in place",
        model.hp.n_layer,
        graph.n_nodes(),
        graph.leafs().len(),
        peak as f64 / (1 << 20) as f64,
        sizes.chunks(BufferTypeIndex::new(0)).len(),
        sum as f64 / (1 << 20) as f64,
        sum as f64 / peak as f64,
    );
    assert_eq!(peak, sizes.total(BufferTypeIndex::new(0)));
    assert!(peak >= logits, "the logits alone take {logits} bytes");
    // At the end only the logits, the final norm and the inputs are live; nothing earlier needs more.
    assert!(peak < logits + (1 << 20), "peak {peak} is more than the logits ({logits}) and 1 MiB");
    assert!(peak * 10 < sum, "memory is reused across layers: peak {peak}, sum {sum}");
    assert!(in_place >= 30 * 4, "rope, softmax, the norms' multiplies and the residual adds run in place");
}
