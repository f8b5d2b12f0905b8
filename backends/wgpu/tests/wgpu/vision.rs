//! The vision and diffusion ops wgpu computes (IM2COL, the direct and
//! transposed convolutions, POOL_1D, POOL_2D, UPSCALE, PAD, PAD_REFLECT_1D,
//! ROLL, GROUP_NORM, L2_NORM): their conformance cases against the CPU, none
//! skipped; and a block of
//! them the scheduler places on wgpu whole, computing the CPU-only result.
//! (`mamba.rs` has a block split between wgpu and the CPU by where its
//! weights are, `mixed_support.rs` one split by an op wgpu refuses.)

use std::sync::Arc;

use super::support::{assert_close, scheduled_run, values};
use gantry_conformance::{self as conformance, Filter, Mode, Reference};
use gantry_cpu::CpuBackend;
use gantry_engine::{Backend, BufferUsage, Context, ConvParams, DType, Device, PoolOp, ScaleMode, TensorId};

#[test]
fn vision_kernels_agree_with_the_cpu() {
    let dev = device_or_skip!();
    let gpu = dev.init_backend(None).unwrap();
    let cpu = CpuBackend::with_threads(2).unwrap();
    let ops = "IM2COL,CONV_2D,CONV_2D_DW,CONV_TRANSPOSE_1D,CONV_TRANSPOSE_2D,POOL_1D,POOL_2D,UPSCALE,PAD,\
               PAD_REFLECT_1D,ROLL,GROUP_NORM,L2_NORM";
    let mut log = Vec::new();
    let summary = conformance::run(gpu.as_ref(), Reference::Backend(&cpu), &Filter::ops(ops), Mode::Test, &mut log);
    let log = String::from_utf8(log).unwrap();
    let failures: Vec<&str> = log.lines().filter(|l| l.contains("FAIL")).collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    // None is left to the CPU (PAD of an empty source is a FILL of zeros).
    assert_eq!(summary.skipped, 0, "{log}");
    assert!(summary.passed > 250, "only {} cases ran:\n{log}", summary.passed);
}

struct Block {
    ctx: Context,
    x: TensorId,
    out: TensorId,
    /// UPSCALE, CONV_2D, GROUP_NORM, POOL_1D, PAD.
    watched: [TensorId; 5],
}

/// A bias in `weights_on`'s memory (which draws the block to that
/// backend), then UPSCALE → CONV_2D → GROUP_NORM → POOL_1D → PAD (circular).
fn build(weights_on: &Arc<dyn Backend>) -> Block {
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [6, 5, 4, 2]).unwrap();
    ctx.set_input(x).unwrap();
    let k = ctx.tensor(DType::F32, [3, 3, 4, 6]).unwrap();
    ctx.set_input(k).unwrap();
    let bias = ctx.tensor(DType::F32, [6, 5, 4, 2]).unwrap();
    let buf = ctx.alloc_buffer(&weights_on.device().buffer_type(), 960, BufferUsage::Weights).unwrap();
    ctx.place(bias, buf, 0).unwrap();
    ctx.set_f32(bias, &values(240, 13, -0.2, 0.2)).unwrap();
    let biased = ctx.add(x, bias).unwrap();
    let up = ctx.upscale_ext(biased, [11, 9, 4, 2], ScaleMode::Bilinear, false).unwrap();
    let conv = ctx.conv_2d_direct(k, up, ConvParams::square(1, 1, 1)).unwrap();
    let norm = ctx.group_norm(conv, 3, 1e-6).unwrap();
    let pool = ctx.pool_1d(norm, PoolOp::Avg, 3, 2, 1).unwrap();
    let out = ctx.pad_ext_circular(pool, [1, 0, 0, 0], [2, 1, 0, 0]).unwrap();
    ctx.set_output(out).unwrap();
    Block { ctx, x, out, watched: [up, conv, norm, pool, out] }
}

fn run(backends: &[Arc<dyn Backend>], x: &[f32], k: &[f32]) -> (Vec<f32>, usize, Vec<String>) {
    let mut b = build(&backends[0]);
    let kt = b.ctx.desc(b.watched[1]).unwrap().srcs[0].unwrap();
    let r = scheduled_run(backends, &mut b.ctx, b.out, &b.watched, |ctx| {
        ctx.set_f32(b.x, x).unwrap();
        ctx.set_f32(kt, k).unwrap();
    });
    (r.out, r.splits, r.placed)
}

#[test]
fn a_vision_block_on_wgpu_agrees_with_the_cpu() {
    let dev = device_or_skip!();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let gpu = dev.init_backend(None).unwrap();
    let x = values(6 * 5 * 4 * 2, 11, -1.0, 1.0);
    let k = values(3 * 3 * 4 * 6, 12, -0.5, 0.5);
    let (want, _, _) = run(std::slice::from_ref(&cpu), &x, &k);
    let (got, splits, placed) = run(&[gpu.clone(), cpu.clone()], &x, &k);
    let (g, c) = (gpu.name().to_string(), cpu.name().to_string());
    assert_eq!(
        placed,
        [g.clone(), g.clone(), g.clone(), g.clone(), g],
        "every op of the block has a wgpu kernel ({c})"
    );
    assert_eq!(splits, 1, "{splits} splits");
    assert_close("upscale, conv, group norm, pool, pad", &got, &want, 1e-5, 1e-4);
}
