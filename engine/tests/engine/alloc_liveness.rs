//! Property tests of the graph allocator on random graphs: no two tensors
//! live at the same time share memory (checked from the graph, not from the
//! allocator's records), weights are left alone, chunks respect the maximum
//! size, and computing the graph in the planned memory gives bit for bit
//! what computing it with a fresh buffer per tensor gives.

use std::sync::Arc;

use gantry_arenas::GraphArena;
use gantry_engine::alloc::BufferTypeIndex;
use gantry_engine::testing::{TestBufferType, interpreter, liveness};
use gantry_engine::{BinaryOp, BufferType, BufferUsage, Context, DType, GraphAllocator, TensorId, UnaryOp};
use proptest::prelude::*;

const UNARY: [UnaryOp; 6] = [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sqr, UnaryOp::Tanh, UnaryOp::Silu, UnaryOp::Sigmoid];
const BINARY: [BinaryOp; 3] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul];
const SCALES: [f32; 4] = [0.5, -1.5, 2.0, -0.25];

/// One step of a random program over a pool of `[16, 4]` F32 values; `usize`
/// fields pick pool entries (modulo the pool size).
#[derive(Debug, Clone)]
enum Step {
    Unary(usize, usize),
    Scale(usize, usize),
    Binary(usize, usize, usize),
    /// `src (op) bias` with the bias row broadcast.
    BiasRow(usize, usize),
    Cont(usize),
    /// Reshape to `[64]`, apply a unary op to the view, reshape back (views, in place over a root).
    FlatUnary(usize, usize),
    /// `cont_shape(transpose(src), [16, 4])`: a permutation of the elements.
    Transposed(usize),
    /// A unary op on two rows of `src` starting at `row` (a view with an offset), concatenated with itself.
    RowsTwice(usize, usize, usize),
    RmsNorm(usize),
    /// `sum_rows` broadcast back: `src - sum_rows(src)`.
    MinusRowSums(usize),
    /// Marks a value as an output.
    Output(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let i = || 0..64usize;
    prop_oneof![
        (i(), 0..UNARY.len()).prop_map(|(a, u)| Step::Unary(a, u)),
        (i(), 0..SCALES.len()).prop_map(|(a, s)| Step::Scale(a, s)),
        (i(), i(), 0..BINARY.len()).prop_map(|(a, b, o)| Step::Binary(a, b, o)),
        (i(), 0..BINARY.len()).prop_map(|(a, o)| Step::BiasRow(a, o)),
        i().prop_map(Step::Cont),
        (i(), 0..UNARY.len()).prop_map(|(a, u)| Step::FlatUnary(a, u)),
        i().prop_map(Step::Transposed),
        (i(), 0..3usize, 0..UNARY.len()).prop_map(|(a, r, u)| Step::RowsTwice(a, r, u)),
        i().prop_map(Step::RmsNorm),
        i().prop_map(Step::MinusRowSums),
        i().prop_map(Step::Output),
    ]
}

struct Program {
    ctx: Context,
    /// Leafs and the values written into them.
    leaf_values: Vec<(TensorId, Vec<f32>)>,
    weight: TensorId,
    weight_buffer: gantry_engine::BufferId,
    outputs: Vec<TensorId>,
}

fn values(seed: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| (((i * 7 + seed * 13) % 23) as f32 - 11.0) / 8.0).collect()
}

fn build(steps: &[Step], host: &Arc<dyn BufferType>) -> Program {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [16, 4]).unwrap();
    ctx.set_name(x, "x").unwrap();
    ctx.set_input(x).unwrap();
    let konst = ctx.tensor(DType::F32, [16, 4]).unwrap(); // an unallocated leaf: the allocator places it
    ctx.set_name(konst, "konst").unwrap();
    let bias = ctx.tensor(DType::F32, [16]).unwrap();
    ctx.set_name(bias, "bias").unwrap();
    let weight = ctx.tensor(DType::F32, [16, 4]).unwrap(); // pre-allocated: left alone
    ctx.set_name(weight, "weight").unwrap();
    let weight_buffer = ctx.alloc_buffer(host, 1024, BufferUsage::Weights).unwrap();
    ctx.place(weight, weight_buffer, 256).unwrap();
    let leaf_values = vec![(x, values(1, 64)), (konst, values(2, 64)), (bias, values(3, 16)), (weight, values(4, 64))];

    let mut pool = vec![x, konst, weight];
    let mut outputs = vec![];
    for s in steps {
        let at = |i: usize| pool[i % pool.len()];
        let ctx = &mut ctx;
        let v = match *s {
            Step::Unary(a, u) => ctx.unary(UNARY[u], at(a)).unwrap(),
            Step::Scale(a, k) => ctx.scale(at(a), SCALES[k], 0.25).unwrap(),
            Step::Binary(a, b, o) => ctx.binary(BINARY[o], at(a), at(b)).unwrap(),
            Step::BiasRow(a, o) => ctx.binary(BINARY[o], at(a), bias).unwrap(),
            Step::Cont(a) => ctx.cont(at(a)).unwrap(),
            Step::FlatUnary(a, u) => {
                let src = if ctx.desc(at(a)).unwrap().is_contiguous() { at(a) } else { ctx.cont(at(a)).unwrap() };
                let flat = ctx.reshape(src, [64]).unwrap();
                let y = ctx.unary(UNARY[u], flat).unwrap();
                ctx.reshape(y, [16, 4]).unwrap()
            }
            Step::Transposed(a) => {
                let t = ctx.transpose(at(a)).unwrap();
                ctx.cont_shape(t, [16, 4]).unwrap()
            }
            Step::RowsTwice(a, row, u) => {
                let src = if ctx.desc(at(a)).unwrap().is_contiguous() { at(a) } else { ctx.cont(at(a)).unwrap() };
                let rows = ctx.view_2d(src, 16, 2, 64, row * 64).unwrap();
                let y = ctx.unary(UNARY[u], rows).unwrap();
                ctx.concat(y, y, 1).unwrap()
            }
            Step::RmsNorm(a) => ctx.rms_norm(at(a), 1e-5).unwrap(),
            Step::MinusRowSums(a) => {
                let s = ctx.sum_rows(at(a)).unwrap();
                ctx.sub(at(a), s).unwrap()
            }
            Step::Output(a) => {
                let v = at(a);
                if v != x && v != weight && v != konst {
                    ctx.set_output(v).unwrap();
                    outputs.push(v);
                }
                continue;
            }
        };
        pool.push(v);
    }
    outputs.push(*pool.last().unwrap());
    Program { ctx, leaf_values, weight, weight_buffer, outputs }
}

fn write_leafs(p: &mut Program) {
    for (t, v) in &p.leaf_values {
        // Leafs no output depends on are not in the graph, and get no memory.
        if p.ctx.is_allocated(*t) {
            p.ctx.set_f32(*t, v).unwrap();
        }
    }
}

fn read_outputs(p: &Program) -> Vec<Vec<u32>> {
    p.outputs.iter().map(|&t| p.ctx.read_f32(t).unwrap().iter().map(|v| v.to_bits()).collect()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn alloc_planned_memory_never_overlaps_live_tensors(
        steps in prop::collection::vec(step(), 1..40),
        two_types in any::<bool>(),
        chunk_units in 2..12usize,
        assignment_seed in any::<u64>(),
    ) {
        // Type 0: plain host memory; type 1 (when used): small chunks, so plans spread over buffers.
        let plain: Arc<dyn BufferType> = TestBufferType::host("plain", 64).shared();
        let max = chunk_units * 64 + 256;
        let small: Arc<dyn BufferType> = TestBufferType::host("small", 64).with_max_size(max).shared();
        let mut p = build(&steps, &plain);
        let arena = GraphArena::new();
        let graph = p.ctx.build_graph(&arena, &p.outputs).unwrap();
        let types = if two_types { vec![plain.clone(), small.clone()] } else { vec![small.clone()] };
        let pick = |i: usize| BufferTypeIndex::new(if two_types { ((assignment_seed >> (i % 64)) & 1) as usize } else { 0 });
        let node_buft: Vec<BufferTypeIndex> = (0..graph.n_nodes()).map(pick).collect();
        let leaf_buft: Vec<BufferTypeIndex> = (0..graph.leafs().len()).map(|i| pick(i + 17)).collect();
        let mut alloc = GraphAllocator::new(&types);
        let planned = alloc.plan(&p.ctx, graph, &node_buft, &leaf_buft).unwrap();
        alloc.alloc_graph(&mut p.ctx, graph, &node_buft, &leaf_buft).unwrap();
        prop_assert_eq!(alloc.plans_computed(), 1, "alloc_graph reuses the dry run's plan");

        // Memory: no live overlap, weights untouched, chunks within the maximum, sizes as planned.
        liveness::check_no_live_overlap(&p.ctx, graph).map_err(TestCaseError::fail)?;
        // The plan's own intervals cover each tensor's lifetime (steps: 0 up front, i + 1 at node i).
        let life = liveness::lifetimes(&p.ctx, graph);
        let step = |i: i64| if i == i64::MAX { u32::MAX } else { (i + 1) as u32 };
        for t in alloc.planned_tensors() {
            let l = life[&t.tensor];
            prop_assert!(t.first_step <= step(l.def) && t.last_step >= step(l.last), "{:?} vs {:?}", t, l);
        }
        prop_assert_eq!(p.ctx.placement(p.weight).unwrap().buffer, p.weight_buffer);
        prop_assert_eq!(p.ctx.placement(p.weight).unwrap().offset, 256);
        let b = BufferTypeIndex::new(types.len() - 1);
        for &id in alloc.buffers(b) {
            prop_assert!(p.ctx.buffer(id).unwrap().buffer.size() <= max);
        }
        for i in (0..types.len()).map(BufferTypeIndex::new) {
            prop_assert_eq!(alloc.buffer_size(i), planned.total(i));
        }

        // Compute in the planned memory, then with a fresh buffer per tensor, and compare.
        write_leafs(&mut p);
        interpreter::compute(&mut p.ctx, graph).unwrap();
        let planned_result = read_outputs(&p);
        prop_assert_eq!(p.ctx.read_f32(p.weight).unwrap(), values(4, 64), "the weight was overwritten");
        for (t, _) in liveness::lifetimes(&p.ctx, graph) {
            if t != p.weight {
                let n = p.ctx.desc(t).unwrap().nbytes();
                let own = p.ctx.alloc_buffer(&plain, n, BufferUsage::Compute).unwrap();
                p.ctx.place(t, own, 0).unwrap();
            }
        }
        write_leafs(&mut p);
        interpreter::compute(&mut p.ctx, graph).unwrap();
        prop_assert_eq!(read_outputs(&p), planned_result);
    }
}
