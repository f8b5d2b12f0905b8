//! The vision, audio and diffusion ops (and the small ops of issue 36's
//! second list) on the CPU: their conformance cases
//! on their own (the whole suite runs them too), ggml's hand-checkable
//! values, and the two paths of CONV_2D agreeing.

use gantry_cpu::CpuBackend;
use gantry_engine::{
    Backend, BufferUsage, Context, ConvParams, DType, GraphArena, PoolOp, ScaleMode, SplitMix64, TensorId,
};

const OPS: &str = "IM2COL,CONV_2D,CONV_2D_DW,CONV_TRANSPOSE_1D,CONV_TRANSPOSE_2D,POOL_1D,POOL_2D,UPSCALE,PAD,\
                   PAD_REFLECT_1D,ROLL,GROUP_NORM,L2_NORM,ARANGE,TIMESTEP_EMBEDDING,XIELU,FILL,TRI,DIAG,\
                   DIAG_MASK_ZERO,SET,ACC,ADD1,COUNT_EQUAL";

#[test]
fn vision_cases_pass() {
    super::op_cases_pass(OPS, 2, 301);
}

/// Computes `outs` on the CPU after writing `inputs`, and reads them back.
fn compute(ctx: &mut Context, outs: &[TensorId], inputs: &[(TensorId, &[f32])]) -> Vec<Vec<f32>> {
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, outs).unwrap();
    let cpu = CpuBackend::with_threads(3).unwrap();
    let buft = cpu.device().buffer_type();
    ctx.alloc_tensors(graph.leafs(), &buft, BufferUsage::Weights).unwrap();
    ctx.alloc_tensors(graph.nodes(), &buft, BufferUsage::Compute).unwrap();
    for (t, v) in inputs {
        ctx.set_f32(*t, v).unwrap();
    }
    cpu.graph_compute(ctx, graph).into_result().unwrap();
    outs.iter().map(|&o| ctx.read_f32(o).unwrap()).collect()
}

#[test]
fn small_values_match_ggml_by_hand() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [4, 1]).unwrap();
    let pooled_max = ctx.pool_1d(x, PoolOp::Max, 2, 2, 1).unwrap();
    // POOL_1D's mean counts only elements inside; POOL_2D's the whole window.
    let pooled_avg = ctx.pool_1d(x, PoolOp::Avg, 2, 2, 1).unwrap();
    let pooled_2d = ctx.pool_2d(x, PoolOp::Avg, [2, 1], [2, 1], [1, 0]).unwrap();
    let reflected = ctx.pad_reflect_1d(x, 2, 3).unwrap();
    let rolled = ctx.roll(x, [1, 0, 0, 0]).unwrap();
    let padded = ctx.pad_ext(x, [1, 0, 0, 0], [2, 1, 0, 0]).unwrap();
    let up = ctx.upscale(x, 2, ScaleMode::Nearest).unwrap();
    let range = ctx.arange(1.0, 2.0, 0.25).unwrap();
    let outs = [pooled_max, pooled_avg, pooled_2d, reflected, rolled, padded, up, range];
    let got = compute(&mut ctx, &outs, &[(x, &[1.0, 2.0, 3.0, 4.0])]);
    assert_eq!(got[0], [1.0, 3.0, 4.0]);
    assert_eq!(got[1], [1.0, 2.5, 4.0]);
    assert_eq!(got[2], [0.5, 2.5, 2.0]);
    assert_eq!(got[3], [3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 2.0, 1.0]);
    assert_eq!(got[4], [4.0, 1.0, 2.0, 3.0]);
    assert_eq!(got[5], [0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(got[6], [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
    assert_eq!(got[7], [1.0, 1.25, 1.5, 1.75]);
}

#[test]
fn conv_2d_through_im2col_matches_the_direct_op() {
    let mut ctx = Context::new();
    let k = ctx.tensor(DType::F32, [3, 2, 3, 4]).unwrap();
    let x = ctx.tensor(DType::F32, [9, 8, 3, 2]).unwrap();
    let conv = ConvParams { stride: [2, 1], pad: [1, 1], dilation: [1, 2] };
    let direct = ctx.conv_2d_direct(k, x, conv).unwrap();
    let graph = ctx.conv_2d(k, x, conv).unwrap();
    assert_eq!(ctx.desc(direct).unwrap().ne, ctx.desc(graph).unwrap().ne);
    let kv: Vec<f32> = (0..72).map(|i| ((i * 7) % 11) as f32 / 11.0 - 0.5).collect();
    let xv: Vec<f32> = (0..432).map(|i| ((i * 5) % 13) as f32 / 13.0 - 0.5).collect();
    let got = compute(&mut ctx, &[direct, graph], &[(k, &kv), (x, &xv)]);
    assert!(got[0].iter().any(|&v| v != 0.0));
    for (a, b) in got[0].iter().zip(&got[1]) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
}

#[test]
fn zero_sized_dims_compute_nothing_and_fail_nothing() {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [5, 3, 0, 2]).unwrap();
    let outs = [
        ctx.pool_2d(x, PoolOp::Max, [2, 1], [1, 1], [0, 0]).unwrap(),
        ctx.pool_1d(x, PoolOp::Avg, 2, 1, 0).unwrap(),
        ctx.upscale(x, 2, ScaleMode::Bilinear).unwrap(),
        ctx.roll(x, [2, 1, 0, 1]).unwrap(),
        ctx.group_norm(x, 2, 1e-6).unwrap(),
        ctx.l2_norm(x, 1e-6).unwrap(),
        ctx.pad(x, [1, 0, 0, 0]).unwrap(),
    ];
    for o in outs {
        assert_eq!(ctx.desc(o).unwrap().nelements(), 0);
    }
    // Padding fills what an empty source leaves.
    let y = ctx.tensor(DType::F32, [5, 0, 3]).unwrap();
    let p = ctx.pad(y, [0, 2, 0, 0]).unwrap();
    let got = compute(&mut ctx, &[p], &[]);
    assert_eq!(got[0], vec![0.0; 30]);
}

/// One random node of the new ops over small random shapes (zero-sized
/// dims and strided sources included) and parameters; `None` when the
/// builder refuses it, which is fine: only what it accepts must compute.
fn random_node(ctx: &mut Context, rng: &mut SplitMix64) -> Option<TensorId> {
    let mut dim = |hi: u64| rng.below(hi) as usize;
    let ne = [dim(7), dim(6), dim(5), dim(3)];
    let kne = [dim(4) + 1, dim(4) + 1, dim(4), dim(4)];
    let (a, b) = (dim(1000), dim(1000));
    let small = |v: usize| (v % 4) as u32;
    let conv = ConvParams {
        stride: [small(a) + 1, small(b) + 1],
        pad: [small(a / 4), small(b / 4)],
        dilation: [small(a / 16) % 2 + 1, small(b / 16) % 2 + 1],
    };
    let transposed = a % 3 == 0;
    let stored = if transposed { [ne[1], ne[0], ne[2], ne[3]] } else { ne };
    let leaf = ctx.tensor(DType::F32, stored).ok()?;
    let x = if transposed { ctx.transpose(leaf).ok()? } else { leaf };
    let k = ctx.tensor(if b % 2 == 0 { DType::F32 } else { DType::F16 }, kne).ok()?;
    let r = match a % 19 {
        0 => ctx.im2col(k, x, conv, b % 2 == 0, DType::F16),
        1 => ctx.conv_2d_direct(k, x, conv),
        2 => ctx.conv_2d_dw_direct(k, x, conv),
        3 => ctx.conv_transpose_1d(k, x, small(b) + 1),
        4 => ctx.conv_transpose_2d(k, x, small(b) + 1),
        5 => {
            ctx.pool_1d(x, if b % 2 == 0 { PoolOp::Max } else { PoolOp::Avg }, small(b) + 1, small(a) + 1, small(b / 4))
        }
        6 => ctx.pool_2d(x, PoolOp::Avg, [small(b) + 1, small(a) + 1], [small(a) + 1, 1], [small(b / 4), small(a / 4)]),
        7 => ctx.upscale_ext(x, kne, if b % 2 == 0 { ScaleMode::Nearest } else { ScaleMode::Bilinear }, b % 4 == 1),
        8 => ctx.pad_ext(x, [small(a), small(b), 0, 1], [small(b), 0, small(a), 0]),
        9 => ctx.pad_ext_circular(x, [small(a), small(b), 0, 1], [small(b), 0, small(a), 0]),
        10 => ctx.pad_reflect_1d(x, small(a), small(b)),
        11 => ctx.roll(x, [small(a) as i32 - 2, small(b) as i32 - 1, 1, 0]),
        12 => ctx.group_norm(x, small(a) + 1, 1e-5),
        13 => ctx.l2_norm(x, 1e-6),
        14 => ctx.timestep_embedding(x, small(b) * 3, 100),
        15 => ctx.tri(x, gantry_engine::TriType::ALL[b % 4]),
        16 => ctx.diag(x),
        17 => {
            let y = ctx.tensor(DType::F32, [kne[0], kne[1], 1, 1]).ok()?;
            ctx.acc(x, y, [4 * ne[0].max(1), 4 * ne[0].max(1) * ne[1].max(1), 64], 4 * small(a) as usize)
        }
        _ => ctx.pool_2d(x, PoolOp::Max, [small(b) + 1, 2], [1, small(a) + 1], [small(a / 4), 1]),
    };
    r.ok()
}

#[test]
fn random_nodes_the_builders_accept_compute_as_the_reference_does() {
    let mut rng = SplitMix64::new(0xc0ffee);
    let cpu = CpuBackend::with_threads(3).unwrap();
    let buft = cpu.device().buffer_type();
    let (mut built, mut nonempty) = (0, 0);
    for i in 0..600 {
        let mut ctx = Context::new();
        let Some(out) = random_node(&mut ctx, &mut rng) else { continue };
        built += 1;
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &[out]).unwrap();
        ctx.alloc_tensors(graph.leafs(), &buft, BufferUsage::Weights).unwrap();
        ctx.alloc_tensors(graph.nodes(), &buft, BufferUsage::Compute).unwrap();
        for &leaf in graph.leafs() {
            let n = ctx.desc(leaf).unwrap().nelements();
            ctx.set_f32(leaf, &rng.values(n, -1.0, 1.0)).unwrap();
        }
        let what = format!("case {i}: {} {}", ctx.desc(out).unwrap().op.name(), ctx.describe(out));
        cpu.graph_compute(&ctx, graph).into_result().unwrap_or_else(|e| panic!("{what}: {e}"));
        if ctx.desc(out).unwrap().nelements() == 0 {
            continue;
        }
        nonempty += 1;
        let want = gantry_conformance::reference::evaluate(&ctx, &graph, out).unwrap();
        let got: Vec<f64> = ctx.read_f32(out).unwrap().into_iter().map(f64::from).collect();
        match gantry_conformance::compare(&want, &got, gantry_conformance::Tolerance::Nmse(1e-5)) {
            gantry_conformance::Verdict::Pass(_) => {}
            gantry_conformance::Verdict::Fail(why) => panic!("{what}: {why}"),
        }
    }
    assert!(built > 200 && nonempty > 100, "{built} built, {nonempty} not empty");
}
