//! A graph mixing ops wgpu computes with one it refuses by design
//! (FLASH_ATTN_EXT over a Q8_0 K/V cache: its kernel reads plain K/V only,
//! `supports_op` says no): the scheduler cuts it into splits, runs the
//! unsupported node on the CPU with copies in and out, and the result is
//! the CPU-only one.

use std::sync::Arc;

use super::support::{assert_close, scheduled_run, values};
use gantry_cpu::CpuBackend;
use gantry_engine::quant::quantize_row;
use gantry_engine::{Backend, BufferUsage, Context, DType, Device, TensorId};

/// Head size.
const D: usize = 32;
/// Query positions and heads, equal so that the attention's result
/// (`[D, heads, positions]`) has the queries' shape (`[D, positions, heads]`).
const N: usize = 2;
/// Cached positions.
const KV: usize = 8;

struct Block {
    ctx: Context,
    q: TensorId,
    k: TensorId,
    v: TensorId,
    out: TensorId,
    /// L2_NORM (wgpu), FLASH_ATTN_EXT (CPU), the final ADD (wgpu).
    watched: [TensorId; 3],
}

/// A shift in `weights_on`'s memory (which draws the block to that backend);
/// `q` normalized, attending over a Q8_0 K/V cache, the result squared,
/// shifted and soft-maxed.
fn build(weights_on: &Arc<dyn Backend>) -> Block {
    let mut ctx = Context::new();
    let q = ctx.tensor(DType::F32, [D, N, N, 1]).unwrap();
    ctx.set_input(q).unwrap();
    let k = ctx.tensor(DType::Q8_0, [D, KV, N, 1]).unwrap();
    ctx.set_input(k).unwrap();
    let v = ctx.tensor(DType::Q8_0, [D, KV, N, 1]).unwrap();
    ctx.set_input(v).unwrap();
    let shift = ctx.tensor(DType::F32, [D, N, N, 1]).unwrap();
    let buf = ctx.alloc_buffer(&weights_on.device().buffer_type(), D * N * N * 4, BufferUsage::Weights).unwrap();
    ctx.place(shift, buf, 0).unwrap();
    ctx.set_f32(shift, &values(D * N * N, 21, -0.5, 0.5)).unwrap();
    let shifted_q = ctx.add(q, shift).unwrap();
    let norm = ctx.l2_norm(shifted_q, 1e-6).unwrap();
    let attn = ctx.flash_attn_ext(norm, k, v, None, 1.0 / (D as f32).sqrt(), 0.0, 0.0).unwrap();
    let sq = ctx.sqr(attn).unwrap();
    let shifted = ctx.add(sq, shift).unwrap();
    let out = ctx.soft_max(shifted).unwrap();
    ctx.set_output(out).unwrap();
    Block { ctx, q, k, v, out, watched: [norm, attn, shifted] }
}

/// `n` values quantized into Q8_0 blocks (the same bytes on either backend).
fn q8_0(n: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; DType::Q8_0.row_size(n).unwrap()];
    quantize_row(DType::Q8_0, &values(n, seed, -1.0, 1.0), &mut bytes).unwrap();
    bytes
}

fn run(backends: &[Arc<dyn Backend>]) -> (Vec<f32>, usize, Vec<String>) {
    let mut blk = build(&backends[0]);
    let (q, k, v) = (blk.q, blk.k, blk.v);
    let r = scheduled_run(backends, &mut blk.ctx, blk.out, &blk.watched, |ctx| {
        ctx.set_f32(q, &values(D * N * N, 23, -1.0, 1.0)).unwrap();
        ctx.set_bytes(k, &q8_0(D * KV * N, 24)).unwrap();
        ctx.set_bytes(v, &q8_0(D * KV * N, 25)).unwrap();
    });
    (r.out, r.splits, r.placed)
}

#[test]
fn an_op_wgpu_lacks_runs_on_the_cpu_and_the_result_is_the_cpu_only_one() {
    let dev = device_or_skip!();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let gpu = dev.init_backend(None).unwrap();
    let (want, _, _) = run(std::slice::from_ref(&cpu));
    let (got, splits, placed) = run(&[gpu.clone(), cpu.clone()]);
    let (g, c) = (gpu.name().to_string(), cpu.name().to_string());
    assert_eq!(placed, [g.clone(), c, g], "L2_NORM and the rest on wgpu, FLASH_ATTN_EXT on the CPU");
    assert!(splits >= 3, "{splits} splits: wgpu, the CPU's FLASH_ATTN_EXT, wgpu again");
    assert_close("normalize, attend, square, shift, soft max", &got, &want, 1e-5, 1e-4);
}
