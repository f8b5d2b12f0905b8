//! Unit tests of the allocator's rules, each on a small hand-built graph
//! whose expected placement follows from the rules alone.

use std::sync::Arc;

use gantry_arenas::{GraphArena, TensorId};

use super::*;
use crate::testing::TestBufferType;
use crate::{BufferType, BufferUsage, Context, DType, Error, Graph, Op, Placement, TensorDesc};

const ALIGN: usize = 64;
/// Bytes of one `[64]` F32 tensor (a multiple of the alignment).
const T64: usize = 256;
const B0: BufferTypeIndex = BufferTypeIndex::new(0);
const B1: BufferTypeIndex = BufferTypeIndex::new(1);
const B2: BufferTypeIndex = BufferTypeIndex::new(2);

fn host(name: &str) -> Arc<dyn BufferType> {
    TestBufferType::host(name, ALIGN).shared()
}

fn f32_1d(ctx: &mut Context, n: usize, name: &str) -> TensorId {
    let t = ctx.tensor(DType::F32, [n]).unwrap();
    ctx.set_name(t, name).unwrap()
}

fn placed(ctx: &Context, t: TensorId) -> Placement {
    ctx.placement(t).unwrap_or_else(|| panic!("{} is not placed", ctx.describe(t)))
}

fn planned(a: &GraphAllocator, t: TensorId) -> PlannedTensor {
    a.planned_tensors().find(|p| p.tensor == t).expect("tensor is in the plan")
}

fn overlap(ctx: &Context, a: TensorId, b: TensorId) -> bool {
    let (pa, pb) = (placed(ctx, a), placed(ctx, b));
    let (na, nb) = (ctx.desc(a).unwrap().nbytes(), ctx.desc(b).unwrap().nbytes());
    pa.buffer == pb.buffer && pa.offset < pb.offset + nb && pb.offset < pa.offset + na
}

fn graph<'a>(ctx: &Context, arena: &'a GraphArena, outs: &[TensorId]) -> Graph<'a> {
    ctx.build_graph(arena, outs).unwrap()
}

#[test]
fn a_chain_of_in_place_ops_runs_in_one_tensor() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    ctx.set_input(x).unwrap();
    let a = ctx.silu(x).unwrap(); // x is an input: not overwritten
    let b = ctx.neg(a).unwrap(); // over a
    let c = ctx.exp(b).unwrap(); // over b
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[c]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert_eq!(placed(&ctx, x).offset, 0, "inputs come first");
    assert!(!overlap(&ctx, x, a));
    assert_eq!(placed(&ctx, a), placed(&ctx, b));
    assert_eq!(placed(&ctx, b), placed(&ctx, c));
    assert_eq!(planned(&alloc, b).in_place_of, Some(a));
    assert_eq!(planned(&alloc, c).in_place_of, Some(b));
    assert_eq!(alloc.buffer_size(B0), 2 * T64);
}

#[test]
fn memory_is_reused_after_the_last_reader() {
    let mut ctx = Context::new();
    let w = f32_1d(&mut ctx, 64, "w"); // a leaf: gets memory, freed after its last reader
    let a = ctx.cont(w).unwrap(); // CONT does not run in place
    let b = ctx.cont(a).unwrap();
    let c = ctx.cont(b).unwrap(); // a is free again: c can take a's memory
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[c]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    for (p, q) in [(w, a), (a, b), (b, c)] {
        assert!(!overlap(&ctx, p, q), "{} and {} are live together", ctx.describe(p), ctx.describe(q));
    }
    assert!(
        alloc.buffer_size(B0) <= 3 * T64,
        "peak is two live tensors plus one freed block: {}",
        alloc.buffer_size(B0)
    );
    let pw = planned(&alloc, w);
    assert_eq!((pw.first_step, pw.last_step), (0, 1), "w is placed up front and freed after node 0");
}

#[test]
fn in_place_needs_a_sole_remaining_reader() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    let a = ctx.cont(x).unwrap();
    let b = ctx.neg(a).unwrap(); // a is still read by c: b cannot take it
    let c = ctx.add(b, a).unwrap(); // b and a are both last read here: c takes b's memory
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[c]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert!(!overlap(&ctx, a, b));
    assert_eq!(planned(&alloc, b).in_place_of, None);
    assert_eq!(planned(&alloc, c).in_place_of, Some(b));
}

#[test]
fn a_source_read_twice_by_the_node_is_not_overwritten() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    let a = ctx.cont(x).unwrap();
    let b = ctx.mul(a, a).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[b]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    // Two reads by one node count as two readers, as in ggml.
    assert_eq!(planned(&alloc, b).in_place_of, None);
    assert!(!overlap(&ctx, a, b));
}

#[test]
fn in_place_is_refused_for_outputs_inputs_other_layouts_and_ops() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    let out = ctx.cont(x).unwrap();
    ctx.set_output(out).unwrap();
    let after_out = ctx.neg(out).unwrap(); // out is an output
    let inp = ctx.cont(x).unwrap();
    ctx.set_input(inp).unwrap();
    let after_inp = ctx.neg(inp).unwrap(); // inp is an input
    let m = ctx.tensor(DType::F32, [8, 8]).unwrap();
    let mt = ctx.cont(m).unwrap();
    let t = ctx.transpose(mt).unwrap();
    let after_view = ctx.neg(t).unwrap(); // other layout (strides differ)
    let sq = ctx.cont(x).unwrap();
    let sum = ctx.sum_rows(sq).unwrap(); // SUM_ROWS does not run in place
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[after_out, after_inp, after_view, sum]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    for (src, dst) in [(out, after_out), (inp, after_inp), (mt, after_view), (sq, sum)] {
        assert_eq!(planned(&alloc, dst).in_place_of, None, "{}", ctx.describe(dst));
        assert!(!overlap(&ctx, src, dst), "{} over {}", ctx.describe(dst), ctx.describe(src));
    }
}

#[test]
fn in_place_over_a_view_takes_the_root_when_the_view_starts_it() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [64, 2]).unwrap();
    let a = ctx.cont(x).unwrap();
    let r = ctx.reshape(a, [128]).unwrap(); // offset 0, a's only view, a has no other reader
    let b = ctx.neg(r).unwrap();
    let c = ctx.cont(x).unwrap();
    let v = ctx.view_1d(c, 64, T64).unwrap(); // starts 256 bytes in
    let d = ctx.neg(v).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[b, d]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert_eq!(planned(&alloc, b).in_place_of, Some(a));
    assert_eq!(placed(&ctx, b), placed(&ctx, a));
    assert_eq!(planned(&alloc, d).in_place_of, None, "a view that does not start at its root's first byte");
    assert!(!overlap(&ctx, c, d));
}

#[test]
fn views_take_no_memory_and_keep_their_root_alive() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [64, 2]).unwrap();
    let a = ctx.cont(x).unwrap();
    let v = ctx.view_1d(a, 64, T64).unwrap(); // the second row of a
    let b = ctx.cont(x).unwrap(); // computed while v (and so a) is still to be read
    let c = ctx.add(b, v).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[c]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert!(alloc.planned_tensors().all(|p| p.tensor != v), "views are not planned");
    assert_eq!(placed(&ctx, v).offset, placed(&ctx, a).offset + T64);
    assert!(!overlap(&ctx, a, b), "a is read through v after b is computed");
    assert!(!overlap(&ctx, a, c), "c is computed while a is read through v");
}

#[test]
fn inputs_are_never_freed_and_outputs_never_reused() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    ctx.set_input(x).unwrap();
    let a = ctx.cont(x).unwrap();
    ctx.set_output(a).unwrap();
    let mut last = a;
    let mut chain = vec![];
    for _ in 0..6 {
        last = ctx.cont(last).unwrap(); // CONT: never in place
        chain.push(last);
    }
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[last]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    for &t in &chain {
        assert!(!overlap(&ctx, x, t), "input overwritten by {}", ctx.describe(t));
        assert!(!overlap(&ctx, a, t), "output overwritten by {}", ctx.describe(t));
    }
    assert_eq!(planned(&alloc, x).last_step, u32::MAX);
    assert_eq!(planned(&alloc, a).last_step, u32::MAX);
}

#[test]
fn pre_allocated_tensors_are_left_alone() {
    let mut ctx = Context::new();
    let weights_type = host("weights");
    let w = ctx.tensor(DType::F32, [64, 8]).unwrap();
    let x = ctx.tensor(DType::F32, [64, 2]).unwrap();
    let wbuf = ctx.alloc_buffer(&weights_type, 4096, BufferUsage::Weights).unwrap();
    ctx.place(w, wbuf, 1024).unwrap();
    let y = ctx.mul_mat(w, x).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[y]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert_eq!(placed(&ctx, w), Placement { buffer: wbuf, offset: 1024 });
    assert!(!alloc.buffers(B0).contains(&wbuf));
    assert!(alloc.planned_tensors().all(|p| p.tensor != w));
    assert!(alloc.buffers(B0).contains(&placed(&ctx, x).buffer), "the unallocated leaf x gets memory");
}

#[test]
fn tensors_in_own_buffers_are_rebound_each_time() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    ctx.set_input(x).unwrap();
    let y = ctx.neg(x).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[y]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    let (px, py) = (placed(&ctx, x), placed(&ctx, y));
    // Someone moves the tensors around inside the allocator's buffer: binding again restores the plan.
    ctx.place(x, py.buffer, py.offset).unwrap();
    ctx.place(y, px.buffer, px.offset).unwrap();
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert_eq!((placed(&ctx, x), placed(&ctx, y)), (px, py));
    assert_eq!(alloc.plans_computed(), 1, "the same graph is not planned again");
}

#[test]
fn a_leaf_position_binds_whatever_tensor_sits_there() {
    // The scheduler's pipelining: the same graph structure, a different input copy at a leaf position.
    let mut ctx = Context::new();
    let copies = [f32_1d(&mut ctx, 64, "copy0"), f32_1d(&mut ctx, 64, "copy1")];
    let other = f32_1d(&mut ctx, 64, "other");
    for c in copies {
        ctx.set_input(c).unwrap();
    }
    let mut alloc = GraphAllocator::new(&[host("h")]);
    let mut spots = vec![];
    for c in copies {
        let mark = ctx.mark();
        let y = ctx.add(c, other).unwrap();
        let arena = GraphArena::new();
        let g = graph(&ctx, &arena, &[y]);
        assert_eq!(g.leafs()[0], c);
        alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
        spots.push(placed(&ctx, c));
        ctx.rewind(mark);
    }
    assert_eq!(spots[0], spots[1], "leaf 0's planned memory, whichever tensor is leaf 0");
    assert_eq!(alloc.plans_computed(), 1);
}

#[test]
fn a_topology_change_with_equal_counts_and_sizes_is_replanned() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    let y = f32_1d(&mut ctx, 64, "y");
    let mark = ctx.mark();
    let mut alloc = GraphAllocator::new(&[host("h")]);
    let arena = GraphArena::new();
    // Graph 1: a = x + y, b = a * y, c = cont(b), d = c + a (a read late).
    let a = ctx.add(x, y).unwrap();
    let b = ctx.mul(a, y).unwrap();
    let c = ctx.cont(b).unwrap();
    let d = ctx.add(c, a).unwrap();
    let g1 = graph(&ctx, &arena, &[d]);
    alloc.alloc_graph(&mut ctx, g1, &[], &[]).unwrap();
    assert!(!overlap(&ctx, a, c));
    let n1 = (g1.n_nodes(), g1.leafs().len());
    ctx.rewind(mark);
    // Graph 2: same counts and sizes, but the last node reads b instead of a (so a dies early).
    let a = ctx.add(x, y).unwrap();
    let b = ctx.mul(a, y).unwrap();
    let c = ctx.cont(b).unwrap();
    let d = ctx.add(c, b).unwrap();
    let arena2 = GraphArena::new();
    let g2 = graph(&ctx, &arena2, &[d]);
    assert_eq!((g2.n_nodes(), g2.leafs().len()), n1);
    alloc.alloc_graph(&mut ctx, g2, &[], &[]).unwrap();
    assert_eq!(alloc.plans_computed(), 2, "the changed graph was planned again");
    assert!(!overlap(&ctx, b, c), "b is read by the last node now");
}

#[test]
fn chunks_respect_max_size_and_no_tensor_straddles() {
    let mut ctx = Context::new();
    let buft: Arc<dyn BufferType> = TestBufferType::host("small", ALIGN).with_max_size(3 * T64).shared();
    let x = f32_1d(&mut ctx, 64, "x");
    ctx.set_input(x).unwrap();
    let mut outs = vec![];
    for i in 0..5 {
        let y = ctx.scale(x, i as f32, 0.0).unwrap();
        ctx.set_output(y).unwrap();
        outs.push(y);
    }
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &outs);
    let mut alloc = GraphAllocator::new(&[buft]);
    let sizes = alloc.plan(&ctx, g, &[], &[]).unwrap();
    assert_eq!(sizes.chunks(B0), &[3 * T64, 3 * T64], "six live tensors of 256 bytes in chunks of at most 768");
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert_eq!(alloc.buffers(B0).len(), 2);
    for &t in outs.iter().chain([&x]) {
        let p = placed(&ctx, t);
        let size = ctx.buffer(p.buffer).unwrap().buffer.size();
        assert!(p.offset + T64 <= size && size <= 3 * T64);
    }
    // A tensor larger than the maximum gets a chunk of its own (and the buffer type refuses it).
    let big = ctx.tensor(DType::F32, [1024]).unwrap();
    let big_out = ctx.neg(big).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[big_out]);
    let mut alloc = GraphAllocator::new(&[TestBufferType::host("small", ALIGN).with_max_size(3 * T64).shared()]);
    assert_eq!(alloc.plan(&ctx, g, &[], &[]).unwrap().chunks(B0), &[4096]);
    let err = alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap_err();
    assert!(matches!(&err, Error::OutOfMemory { buffer_type, size: 4096 } if buffer_type == "small"), "{err}");
}

#[test]
fn nodes_go_to_their_buffer_types_and_repeated_types_share() {
    let mut ctx = Context::new();
    let (gpu, cpu) = (host("gpu"), host("cpu"));
    let x = f32_1d(&mut ctx, 64, "x");
    let a = ctx.cont(x).unwrap();
    let b = ctx.neg(a).unwrap(); // other buffer type than a: not in place
    let c = ctx.neg(b).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[c]);
    let mut alloc = GraphAllocator::new(&[gpu.clone(), cpu, gpu]);
    let sizes = alloc.reserve(&mut ctx, g, &[B0, B1, B2], &[B1]).unwrap();
    assert_eq!(sizes.total(B0), T64, "a, then c over a's freed memory (type 2 is type 0)");
    assert_eq!(sizes.total(B1), T64, "x, then b over x's freed memory");
    assert_eq!(sizes.total(B2), 0, "a repeated buffer type is counted once");
    alloc.alloc_graph(&mut ctx, g, &[B0, B1, B2], &[B1]).unwrap();
    assert_eq!(alloc.buffers(B2), alloc.buffers(B0));
    assert_eq!(ctx.buffer(placed(&ctx, a).buffer).unwrap().buffer_type.name(), "gpu");
    assert_eq!(ctx.buffer(placed(&ctx, b).buffer).unwrap().buffer_type.name(), "cpu");
    assert_eq!(ctx.buffer(placed(&ctx, c).buffer).unwrap().buffer_type.name(), "gpu");
    assert_eq!(planned(&alloc, b).in_place_of, None);
    assert_eq!(placed(&ctx, c), placed(&ctx, a));
    assert_eq!((alloc.buffer_size(B0), alloc.buffer_size(B1), alloc.buffer_size(B2)), (T64, T64, 0));
}

#[test]
fn a_graph_that_fits_the_reservation_allocates_no_buffer() {
    let mut ctx = Context::new();
    let buft = Arc::new(TestBufferType::host("h", ALIGN));
    let dyn_buft: Arc<dyn BufferType> = buft.clone();
    let x = ctx.tensor(DType::F32, [64, 8]).unwrap();
    ctx.set_input(x).unwrap();
    let mark = ctx.mark();
    let mut alloc = GraphAllocator::new(&[dyn_buft]);
    let build = |ctx: &mut Context, rows: usize| {
        let v = ctx.view_2d(x, 64, rows, T64, 0).unwrap();
        let a = ctx.cont(v).unwrap();
        let b = ctx.cont(a).unwrap();
        ctx.sum_rows(b).unwrap()
    };
    let big = build(&mut ctx, 8);
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[big]);
    alloc.reserve(&mut ctx, g, &[], &[]).unwrap();
    let reserved = alloc.buffer_size(B0);
    let made = buft.buffers_allocated();
    for rows in [1, 4, 8, 2] {
        ctx.rewind(mark);
        let out = build(&mut ctx, rows);
        let arena = GraphArena::new();
        let g = graph(&ctx, &arena, &[out]);
        alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
        assert!(ctx.is_allocated(out));
    }
    assert_eq!(buft.buffers_allocated(), made, "smaller graphs fit the reservation");
    assert_eq!(alloc.buffer_size(B0), reserved);
}

#[test]
fn leafs_and_unlisted_sources_get_memory() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    let hidden = f32_1d(&mut ctx, 64, "hidden");
    let y = ctx.add(x, hidden).unwrap();
    // A graph listing y only: x and hidden are read but not listed.
    let nodes = [y];
    let g = Graph::from_parts(&nodes, &[], &nodes);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert!(ctx.is_allocated(x) && ctx.is_allocated(hidden) && ctx.is_allocated(y));
    assert!(!overlap(&ctx, x, hidden));
    assert_eq!(planned(&alloc, y).in_place_of, Some(x), "x has no other reader");
}

#[test]
fn op_none_nodes_and_dependency_views() {
    // The scheduler's allocation graph: at a split start, a dependency view of
    // the source (srcs[0] = source, op NONE or VIEW) keeps it alive up to that
    // point, then the input copy (op NONE, not a view) is allocated like a node.
    for dep_op in [Op::None, Op::View] {
        let mut ctx = Context::new();
        let x = f32_1d(&mut ctx, 64, "x");
        let src = ctx.cont(x).unwrap();
        let mid = ctx.cont(x).unwrap();
        let mid2 = ctx.neg(mid).unwrap();
        let mut dep = *ctx.desc(src).unwrap();
        dep.op = dep_op;
        dep.srcs = [None; crate::MAX_SRC];
        dep.srcs[0] = Some(src);
        dep.view_src = Some(src);
        dep.view_offset = 0;
        let dep = ctx.insert(dep);
        let copy = ctx.insert(TensorDesc::contiguous(DType::F32, [64, 1, 1, 1]).unwrap());
        let after = ctx.neg(copy).unwrap();
        let nodes = [src, mid, mid2, dep, copy, after];
        let leafs = [x];
        let outs = [after];
        let g = Graph::from_parts(&nodes, &leafs, &outs);
        let mut alloc = GraphAllocator::new(&[host("h")]);
        alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
        assert!(!overlap(&ctx, src, mid) && !overlap(&ctx, src, mid2), "{dep_op:?}: src is alive until the dependency");
        assert_eq!(planned(&alloc, src).last_step, 4, "{dep_op:?}: freed right after the dependency (node 3)");
        assert_eq!(planned(&alloc, copy).first_step, 5, "{dep_op:?}: the copy is placed at its position");
        assert!(ctx.is_allocated(copy) && ctx.is_allocated(after));
    }
}

#[test]
fn errors_name_what_is_wrong() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    let y = ctx.neg(x).unwrap();
    ctx.set_name(y, "the_node").unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[y]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    let msg = |e: Error| e.to_string();
    assert!(msg(alloc.plan(&ctx, g, &[B0, B0], &[]).unwrap_err()).contains("2 node buffer-type indices"));
    assert!(msg(alloc.plan(&ctx, g, &[BufferTypeIndex::new(3)], &[]).unwrap_err()).contains("the_node"));
    assert!(msg(GraphAllocator::new(&[]).plan(&ctx, g, &[], &[]).unwrap_err()).contains("without buffer types"));
    // A view whose source is a view.
    let v = ctx.view_1d(y, 32, 0).unwrap();
    let mut bad = *ctx.desc(v).unwrap();
    bad.view_src = Some(v);
    let bad = ctx.insert(bad);
    ctx.set_name(bad, "bad_view").unwrap();
    let nodes = [y, v, bad];
    let g = Graph::from_parts(&nodes, &[], &[]);
    assert!(msg(alloc.plan(&ctx, g, &[], &[]).unwrap_err()).contains("bad_view"));
    // After errors, a good graph still plans and binds.
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[y]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert!(ctx.is_allocated(y));
}

#[test]
fn zero_size_tensors_are_placed() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [0, 4]).unwrap();
    let y = ctx.neg(x).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[y]);
    let mut alloc = GraphAllocator::new(&[host("h")]);
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert!(ctx.is_allocated(x) && ctx.is_allocated(y));
    assert_eq!(alloc.buffer_size(B0), 0);
}

#[test]
fn needs_replan_tells_ahead_and_alloc_graph_still_plans() {
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 64, "x");
    let mark = ctx.mark();
    let mut alloc = GraphAllocator::new(&[host("h")]);
    let a = ctx.neg(x).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[a]);
    assert!(alloc.needs_replan(&ctx, g, &[], &[]), "nothing planned yet");
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert_eq!(alloc.plans_computed(), 1);
    assert!(!alloc.needs_replan(&ctx, g, &[], &[]));
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert_eq!(alloc.plans_computed(), 1);
    // Another graph: asking first must not make alloc_graph believe the plan is current.
    ctx.rewind(mark);
    let a = ctx.cont(x).unwrap();
    let b = ctx.add(a, x).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[b]);
    assert!(alloc.needs_replan(&ctx, g, &[], &[]));
    assert!(alloc.needs_replan(&ctx, g, &[], &[]), "asking twice does not change the answer");
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert_eq!(alloc.plans_computed(), 2);
    assert!(ctx.is_allocated(b));
    // A buffer freed behind the allocator's back has to be allocated again.
    let buffer = alloc.buffers(B0)[0];
    ctx.free_buffer(buffer).unwrap();
    assert!(alloc.needs_replan(&ctx, g, &[], &[]));
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert!(ctx.is_allocated(b) && alloc.buffers(B0)[0] != buffer);
}

#[test]
fn the_allocator_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<GraphAllocator>();
    send_sync::<PlanSizes>();
}

#[test]
fn placing_initializes_tensors_and_a_new_plan_resets_the_buffers_first() {
    let buft_arc = host("hooks");
    // The counters live in the type, shared by its buffers: read them through a downcast.
    let hooks = |b: &Arc<dyn BufferType>| {
        let t = b.as_any().downcast_ref::<TestBufferType>().unwrap();
        (t.init_tensor_calls(), t.reset_calls())
    };
    let mut ctx = Context::new();
    let x = f32_1d(&mut ctx, 16, "x");
    ctx.alloc_tensors(&[x], &buft_arc, BufferUsage::Any).unwrap();
    assert_eq!(hooks(&buft_arc), (1, 0), "placing x called init_tensor once");
    let a = ctx.neg(x).unwrap();
    let b = ctx.neg(a).unwrap();
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, &[b]);
    let mut alloc = GraphAllocator::new(std::slice::from_ref(&buft_arc));
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    let (inits, resets) = hooks(&buft_arc);
    assert!(inits >= 3 && resets >= 1, "a fresh plan resets its buffer and initializes a and b: {inits}, {resets}");
    alloc.alloc_graph(&mut ctx, g, &[], &[]).unwrap();
    assert_eq!(hooks(&buft_arc), (inits, resets), "the same plan again moves nothing: no hook runs");
    let c = ctx.neg(b).unwrap();
    let arena2 = GraphArena::new();
    let g2 = graph(&ctx, &arena2, &[c]);
    alloc.alloc_graph(&mut ctx, g2, &[], &[]).unwrap();
    let (inits2, resets2) = hooks(&buft_arc);
    assert!(resets2 > resets && inits2 >= inits + 3, "another plan resets and places every tensor again");
}
