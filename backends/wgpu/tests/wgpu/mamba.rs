//! The state-space ops on wgpu (SSM_CONV, SSM_SCAN): their conformance
//! cases against the CPU; a Mamba-2-like block whose input projection
//! (IQ4_NL weights in host memory) runs where its weights are, on the CPU,
//! and whose convolution and scan run on wgpu, computing the CPU-only
//! result; and SSM_SCAN's state indices checked in the shader.

use std::sync::Arc;

use super::support::{Harness, assert_close, scheduled_run, values};
use gantry_conformance::{self as conformance, Filter, Mode, Reference};
use gantry_cpu::CpuBackend;
use gantry_engine::{Backend, BufferUsage, Context, DType, Device, TensorId};

#[test]
fn ssm_kernels_agree_with_the_cpu() {
    let dev = device_or_skip!();
    let gpu = dev.init_backend(None).unwrap();
    let cpu = CpuBackend::with_threads(2).unwrap();
    let mut log = Vec::new();
    let filter = Filter::ops("SSM_CONV,SSM_SCAN");
    let summary = conformance::run(gpu.as_ref(), Reference::Backend(&cpu), &filter, Mode::Test, &mut log);
    let log = String::from_utf8(log).unwrap();
    let failures: Vec<&str> = log.lines().filter(|l| l.contains("FAIL")).collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(summary.skipped, 0, "{log}");
    assert_eq!(summary.passed, 11, "{log}");
}

const D_MODEL: usize = 32;
const D_INNER: usize = 16;
const D_CONV: usize = 4;
const D_STATE: usize = 8;
const HEAD_DIM: usize = 4;
const N_HEAD: usize = D_INNER / HEAD_DIM;
const N_TOKENS: usize = 5;
const N_SEQS: usize = 2;
const N_STATES: usize = 3;

struct Block {
    ctx: Context,
    x: TensorId,
    out: TensorId,
    /// The input projection (IQ4_NL), SSM_CONV, SSM_SCAN.
    watched: [TensorId; 3],
}

/// Input projection (IQ4_NL, host memory) → the sequences' convolution
/// states prepended → SSM_CONV → SILU → SSM_SCAN (Mamba-2, B, C and dt
/// projected from the input; states picked by ids that reorder them).
fn build(weights_on: &Arc<dyn Backend>) -> Block {
    let mut ctx = Context::new();
    let buft = weights_on.device().buffer_type();
    let weight = |ctx: &mut Context, ne: &[usize], seed: u64, lo: f32, hi: f32| {
        let t = ctx.tensor(DType::F32, ne).unwrap();
        let d = *ctx.desc(t).unwrap();
        let buf = ctx.alloc_buffer(&buft, d.nbytes(), BufferUsage::Weights).unwrap();
        ctx.place(t, buf, 0).unwrap();
        ctx.set_f32(t, &values(d.nelements(), seed, lo, hi)).unwrap();
        t
    };
    // IQ4_NL is read-only (nothing quantizes into it): a small f16 scale
    // and seeded nibbles per block, in host memory.
    let w_in = ctx.tensor(DType::IQ4_NL, [D_MODEL, D_INNER]).unwrap();
    let nbytes = ctx.desc(w_in).unwrap().nbytes();
    let buf = ctx.alloc_buffer(&gantry_cpu::buffer_type(), nbytes, BufferUsage::Weights).unwrap();
    ctx.place(w_in, buf, 0).unwrap();
    let nibbles = values(nbytes, 3, 0.0, 256.0);
    let scale = half::f16::from_f32(0.02).to_le_bytes();
    let blocks: Vec<u8> = (0..nbytes).map(|i| if i % 18 < 2 { scale[i % 18] } else { nibbles[i] as u8 }).collect();
    ctx.set_bytes(w_in, &blocks).unwrap();
    let conv_states = weight(&mut ctx, &[D_CONV - 1, D_INNER, N_SEQS], 4, -0.5, 0.5);
    let conv_w = weight(&mut ctx, &[D_CONV, D_INNER], 5, -0.5, 0.5);
    let w_dt = weight(&mut ctx, &[D_MODEL, N_HEAD], 6, -0.2, 0.2);
    let w_b = weight(&mut ctx, &[D_MODEL, D_STATE], 7, -0.2, 0.2);
    let w_c = weight(&mut ctx, &[D_MODEL, D_STATE], 8, -0.2, 0.2);
    let a = weight(&mut ctx, &[1, N_HEAD], 9, -1.0, -0.1);
    let states = weight(&mut ctx, &[D_STATE, HEAD_DIM, N_HEAD, N_STATES], 10, -0.5, 0.5);
    let ids = ctx.tensor(DType::I32, [N_SEQS]).unwrap();
    let buf = ctx.alloc_buffer(&buft, 4 * N_SEQS, BufferUsage::Weights).unwrap();
    ctx.place(ids, buf, 0).unwrap();
    ctx.set_i32(ids, &[2, 0]).unwrap();

    let x = ctx.tensor(DType::F32, [D_MODEL, N_TOKENS, N_SEQS]).unwrap();
    ctx.set_input(x).unwrap();
    let projected = ctx.mul_mat(w_in, x).unwrap();
    let by_token = ctx.permute(projected, [1, 0, 2, 3]).unwrap();
    let by_token = ctx.cont(by_token).unwrap();
    let sx = ctx.concat(conv_states, by_token, 0).unwrap();
    let conv = ctx.ssm_conv(sx, conv_w).unwrap();
    let act = ctx.silu(conv).unwrap();
    let xs = ctx.reshape(act, [HEAD_DIM, N_HEAD, N_TOKENS, N_SEQS]).unwrap();
    let dt = ctx.mul_mat(w_dt, x).unwrap();
    let b = ctx.mul_mat(w_b, x).unwrap();
    let b = ctx.reshape(b, [D_STATE, 1, N_TOKENS, N_SEQS]).unwrap();
    let c = ctx.mul_mat(w_c, x).unwrap();
    let c = ctx.reshape(c, [D_STATE, 1, N_TOKENS, N_SEQS]).unwrap();
    let out = ctx.ssm_scan(states, xs, dt, a, b, c, ids, 1).unwrap();
    ctx.set_output(out).unwrap();
    Block { ctx, x, out, watched: [projected, conv, out] }
}

/// The output, the number of splits and the backend of each watched node.
fn run(backends: &[Arc<dyn Backend>], input: &[f32]) -> (Vec<f32>, usize, Vec<String>) {
    let mut b = build(&backends[0]);
    let r = scheduled_run(backends, &mut b.ctx, b.out, &b.watched, |ctx| ctx.set_f32(b.x, input).unwrap());
    (r.out, r.splits, r.placed)
}

#[test]
fn a_mamba_block_split_between_wgpu_and_the_cpu_agrees_with_the_cpu() {
    let dev = device_or_skip!();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let gpu = dev.init_backend(None).unwrap();
    let x = values(D_MODEL * N_TOKENS * N_SEQS, 11, -1.0, 1.0);
    let (want, _, _) = run(std::slice::from_ref(&cpu), &x);
    let (got, splits, placed) = run(&[gpu.clone(), cpu.clone()], &x);
    let (g, c) = (gpu.name().to_string(), cpu.name().to_string());
    assert_eq!(placed, [c, g.clone(), g], "the projection over host weights on the CPU, the SSM ops on wgpu");
    assert!(splits >= 2, "{splits} splits");
    assert_close("y and final states", &got, &want, 1e-5, 1e-4);
}

/// An SSM_SCAN (Mamba-2, two kept states) over `ids`, on the harness's wgpu device.
fn scan_on_wgpu(ids: &[i32]) -> Option<Vec<f32>> {
    let dev = super::support::device()?;
    let mut h = Harness::new(dev);
    let (nc, nr, nh, nt, ns) = (8, 2, 4, 3, ids.len());
    let s = h.input(DType::F32, &[nc, nr, nh, N_STATES], &values(nc * nr * nh * N_STATES, 1, -1.0, 1.0));
    let x = h.input(DType::F32, &[nr, nh, nt, ns], &values(nr * nh * nt * ns, 2, -1.0, 1.0));
    let dt = h.input(DType::F32, &[nh, nt, ns], &values(nh * nt * ns, 3, -1.0, 1.0));
    let a = h.input(DType::F32, &[1, nh], &values(nh, 4, -1.0, -0.1));
    let b = h.input(DType::F32, &[nc, 2, nt, ns], &values(nc * 2 * nt * ns, 5, -1.0, 1.0));
    let c = h.input(DType::F32, &[nc, 2, nt, ns], &values(nc * 2 * nt * ns, 6, -1.0, 1.0));
    let ids = h.input_i32(&[ns], ids);
    let out = h.ctx.ssm_scan(s, x, dt, a, b, c, ids, 2).unwrap();
    h.compute(&[out]);
    Some(h.read(out))
}

/// A state index outside the states (the CPU fails the compute with an
/// error: `backends/cpu`'s tests) reads no state on wgpu: that sequence's outputs and states are
/// NaN, and the other sequences' results are what they are with valid ids.
#[test]
fn ssm_scan_ids_outside_the_states_give_nan_and_read_nothing() {
    let Some(valid) = scan_on_wgpu(&[2, 0, 1]) else { return };
    let (nr, nh, nt, ns, state_len) = (2, 4, 3, 3, 8 * 2 * 4);
    let y_len = nr * nh * nt * ns;
    for bad in [N_STATES as i32, -1, i32::MAX, i32::MIN] {
        let got = scan_on_wgpu(&[2, bad, 1]).unwrap();
        let seq_of_y = |i: usize| i / (nr * nh * nt);
        let seq_of_state = |i: usize| ((i - y_len) / state_len) % ns;
        for (i, (&g, &v)) in got.iter().zip(&valid).enumerate() {
            let seq = if i < y_len { seq_of_y(i) } else { seq_of_state(i) };
            if seq == 1 {
                assert!(g.is_nan(), "id {bad}: element {i} of sequence 1 is {g}, not NaN");
            } else {
                assert_eq!(g.to_bits(), v.to_bits(), "id {bad}: element {i} of sequence {seq}");
            }
        }
    }
}
