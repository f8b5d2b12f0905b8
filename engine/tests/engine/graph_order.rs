//! Topological order: diamonds, shared subgraphs, unreachable tensors, views.

use std::collections::HashMap;

use gantry_arenas::GraphArena;
use gantry_engine::{Context, DType, Graph, TensorId};

/// Every source (and view source) of a node appears before it.
fn assert_topological(ctx: &Context, g: &Graph<'_>) {
    let pos: HashMap<TensorId, usize> = g.nodes().iter().enumerate().map(|(i, &t)| (t, i)).collect();
    for (i, &n) in g.nodes().iter().enumerate() {
        let d = ctx.desc(n).unwrap();
        for s in d.sources().chain(d.view_src) {
            match pos.get(&s) {
                Some(&j) => assert!(j < i, "source {s:?} at {j} after its consumer at {i}"),
                None => assert!(g.leafs().contains(&s), "source {s:?} is neither node nor leaf"),
            }
        }
    }
}

#[test]
fn diamond_visits_shared_parent_once() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [4]).unwrap();
    let a = ctx.exp(x).unwrap();
    let b = ctx.neg(a).unwrap();
    let c = ctx.sqr(a).unwrap();
    let d = ctx.add(b, c).unwrap();
    let arena = GraphArena::new();
    let g = ctx.build_graph(&arena, &[d]).unwrap();
    assert_eq!(g.nodes(), &[a, b, c, d]);
    assert_eq!(g.leafs(), &[x]);
    assert_topological(&ctx, &g);
}

#[test]
fn unreachable_tensors_are_left_out() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [4]).unwrap();
    let unused_leaf = ctx.tensor(DType::F32, [4]).unwrap();
    let y = ctx.relu(x).unwrap();
    let _dead = ctx.add(y, unused_leaf).unwrap();
    let arena = GraphArena::new();
    let g = ctx.build_graph(&arena, &[y]).unwrap();
    assert_eq!((g.nodes(), g.leafs()), (&[y][..], &[x][..]));
}

#[test]
fn shared_subgraph_across_outputs() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [8, 2]).unwrap();
    let w = ctx.tensor(DType::F32, [8, 3]).unwrap();
    let h = ctx.mul_mat(w, x).unwrap();
    let o1 = ctx.silu(h).unwrap();
    let o2 = ctx.sum(h).unwrap();
    let arena = GraphArena::new();
    let g = ctx.build_graph(&arena, &[o1, o2, o1]).unwrap();
    assert_eq!(g.nodes(), &[h, o1, o2]);
    assert_eq!(g.leafs(), &[w, x], "leafs in the order first read");
    assert_eq!(g.outputs(), &[o1, o2, o1]);
    let v = g.view(1..3).unwrap();
    assert_eq!((v.nodes(), v.leafs().len()), (&[o1, o2][..], 0));
    assert!(g.view(2..5).is_none());
}

#[test]
fn views_and_copies_follow_their_sources() {
    let mut ctx = Context::new();
    let cache = ctx.tensor(DType::F16, [8, 16]).unwrap();
    let k = ctx.tensor(DType::F32, [8, 2]).unwrap();
    let slot = ctx.view_2d(cache, 8, 2, 16, 32).unwrap();
    let store = ctx.cpy(k, slot).unwrap();
    let kv = ctx.view_2d(cache, 8, 4, 16, 0).unwrap();
    let q = ctx.tensor(DType::F32, [8, 1]).unwrap();
    let kq = ctx.mul_mat(kv, q).unwrap();
    let arena = GraphArena::new();
    // The store must run before the product reads the cache: ask for both.
    let g = ctx.build_graph(&arena, &[store, kq]).unwrap();
    assert_eq!(g.nodes(), &[slot, store, kv, kq]);
    assert_eq!(g.leafs(), &[k, cache, q]);
    assert_topological(&ctx, &g);
}

#[test]
fn deep_chains_do_not_overflow_the_stack() {
    let mut ctx = Context::new();
    let mut t = ctx.tensor(DType::F32, [2]).unwrap();
    for _ in 0..200_000 {
        t = ctx.neg(t).unwrap();
    }
    let arena = GraphArena::new();
    let g = ctx.build_graph(&arena, &[t]).unwrap();
    assert_eq!(g.n_nodes(), 200_000);
}

#[test]
fn stale_outputs_and_sources_are_errors() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [2]).unwrap();
    let y = ctx.neg(x).unwrap();
    ctx.remove(x).unwrap();
    let arena = GraphArena::new();
    let err = ctx.build_graph(&arena, &[y]).unwrap_err().to_string();
    assert!(err.contains("removed"), "{err}");
    ctx.remove(y).unwrap();
    assert!(ctx.build_graph(&arena, &[y]).is_err());
}
