//! Rebuilding the same graph after a reset makes zero heap allocations.

use gantry_arenas::GraphArena;
use gantry_engine::testing::CountingAllocator;
use gantry_engine::{Context, DType, RopeMode, RopeParams, TensorId};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations() -> usize {
    CountingAllocator::this_thread()
}

/// One attention + FFN block, enough ops and views to exercise every table.
fn build_block(ctx: &mut Context, x: TensorId, w: &[TensorId; 4], pos: TensorId) -> gantry_engine::Result<TensorId> {
    let h = ctx.rms_norm(x, 1e-5)?;
    let q = ctx.mul_mat(w[0], h)?;
    let q = ctx.reshape(q, [16, 4, 4])?;
    let q = ctx.rope(q, pos, None, RopeParams::new(16, RopeMode::Normal, 10000.0))?;
    let q = ctx.permute(q, [0, 2, 1, 3])?;
    let k = ctx.view_3d(q, [16, 4, 4], 16 * 4, 16 * 4 * 4, 0)?;
    let kq = ctx.mul_mat(k, q)?;
    let kq = ctx.soft_max_ext(kq, None, 0.25, 0.0)?;
    let o = ctx.cont(kq)?;
    let o = ctx.reshape(o, [4 * 4 * 4])?;
    let o = ctx.view_2d(o, 16, 4, 16 * 4, 0)?;
    let o = ctx.cont(o)?;
    ctx.set_name(o, "attn_out")?;
    let f = ctx.mul_mat(w[1], o)?;
    let f = ctx.swiglu(f)?;
    let f = ctx.mul_mat(w[2], f)?;
    let f = ctx.add(f, x)?;
    let f = ctx.scale(f, 0.5, 0.0)?;
    ctx.mul_mat(w[3], f)
}

#[test]
fn rebuilding_the_same_graph_allocates_nothing() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [64, 4]).unwrap();
    let pos = ctx.tensor(DType::I32, [4]).unwrap();
    let w = [
        ctx.tensor(DType::Q4_0, [64, 64]).unwrap(),
        ctx.tensor(DType::F16, [16, 256]).unwrap(),
        ctx.tensor(DType::F32, [128, 64]).unwrap(),
        ctx.tensor(DType::F32, [64, 32]).unwrap(),
    ];
    let mark = ctx.mark();
    let mut arena = GraphArena::new();
    let mut last = (0, 0);
    for round in 0..4 {
        ctx.rewind(mark);
        arena.reset();
        let before = allocations();
        let out = build_block(&mut ctx, x, &w, pos).unwrap();
        let graph = ctx.build_graph(&arena, &[out]).unwrap();
        let made = allocations() - before;
        assert_eq!(graph.leafs().len(), 6);
        last = (graph.n_nodes(), made);
        // The first rounds size the tables and the arena; after that nothing grows.
        if round >= 2 {
            assert_eq!(made, 0, "round {round}: rebuilding made {made} heap allocations");
        }
    }
    assert!(last.0 > 15, "the block has {} nodes", last.0);
}
