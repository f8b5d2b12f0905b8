//! The vision, audio and diffusion ops (and the small ops of issue 36's
//! second list) on the CPU: their conformance cases
//! on their own (the whole suite runs them too), ggml's hand-checkable
//! values, and the two paths of CONV_2D agreeing.

use gantry_conformance::{self as conformance, Filter, Mode, Reference};
use gantry_cpu::CpuBackend;
use gantry_engine::{Backend, BufferUsage, Context, ConvParams, DType, GraphArena, PoolOp, ScaleMode, TensorId};

const OPS: &str = "IM2COL,CONV_2D,CONV_2D_DW,CONV_TRANSPOSE_1D,CONV_TRANSPOSE_2D,POOL_1D,POOL_2D,UPSCALE,PAD,\
                   PAD_REFLECT_1D,ROLL,GROUP_NORM,L2_NORM,ARANGE,TIMESTEP_EMBEDDING,XIELU,FILL,TRI,DIAG,\
                   DIAG_MASK_ZERO,SET,ACC,ADD1,COUNT_EQUAL";

#[test]
fn vision_cases_pass() {
    let cpu = CpuBackend::with_threads(2).unwrap();
    let mut log = Vec::new();
    let summary = conformance::run(&cpu, Reference::Scalar, &Filter::ops(OPS), Mode::Test, &mut log);
    let log = String::from_utf8(log).unwrap();
    let problems: Vec<&str> = log.lines().filter(|l| l.contains("FAIL") || l.contains("not supported (")).collect();
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    assert_eq!((summary.failed, summary.skipped), (0, 0));
    assert!(summary.passed > 300, "only {} cases ran", summary.passed);
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
