//! A gpt-oss-style mixture-of-experts block on wgpu beside the CPU: routing
//! (TOP_K), the gate experts' products (MUL_MAT_ID over Q8_0), expert biases
//! (ADD_ID), SWIGLU_OAI and the router's softmax with a sink run on wgpu,
//! while the up experts' product over IQ4_NL weights in host memory runs
//! where its weights are, on the CPU: the scheduler
//! cuts the graph, and the result is the CPU-only one.

use std::sync::Arc;

use super::support::{assert_close, values};
use gantry_arenas::GraphArena;
use gantry_cpu::CpuBackend;
use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::{Backend, BufferUsage, Context, DType, Device, TensorId};

const K: usize = 64;
const M: usize = 32;
const N_EXPERT: usize = 6;
const N_USED: usize = 2;
const N_TOKENS: usize = 5;

struct Block {
    ctx: Context,
    x: TensorId,
    outs: [TensorId; 2],
    /// TOP_K, the gate MUL_MAT_ID, ADD_ID, the sink SOFT_MAX, then the up
    /// (IQ4_NL) MUL_MAT_ID.
    watched: [TensorId; 5],
}

/// Router, top-2 routing, gate and up experts with biases, SWIGLU_OAI; the
/// router probabilities through a softmax with a sink.
fn build(weights_on: &Arc<dyn Backend>) -> Block {
    let mut ctx = Context::new();
    let buft = weights_on.device().buffer_type();
    let weight = |ctx: &mut Context, dtype: DType, ne: &[usize], seed: u64| {
        let t = ctx.tensor(dtype, ne).unwrap();
        let d = *ctx.desc(t).unwrap();
        let buf = ctx.alloc_buffer(&buft, d.nbytes(), BufferUsage::Weights).unwrap();
        ctx.place(t, buf, 0).unwrap();
        ctx.set_f32(t, &values(d.nelements(), seed, -0.5, 0.5)).unwrap();
        t
    };
    let router = weight(&mut ctx, DType::F32, &[K, N_EXPERT], 1);
    let gate = weight(&mut ctx, DType::Q8_0, &[K, M, N_EXPERT], 2);
    // IQ4_NL is read-only (nothing quantizes into it): seeded blocks of a
    // small f16 scale and random nibbles, in host memory.
    let up = ctx.tensor(DType::IQ4_NL, [K, M, N_EXPERT]).unwrap();
    let nbytes = ctx.desc(up).unwrap().nbytes();
    let buf = ctx.alloc_buffer(&gantry_cpu::buffer_type(), nbytes, BufferUsage::Weights).unwrap();
    ctx.place(up, buf, 0).unwrap();
    let nibbles = values(nbytes, 3, 0.0, 256.0);
    let scale = half::f16::from_f32(0.01).to_le_bytes();
    let blocks: Vec<u8> = (0..nbytes).map(|i| if i % 18 < 2 { scale[i % 18] } else { nibbles[i] as u8 }).collect();
    ctx.set_bytes(up, &blocks).unwrap();
    let gate_bias = weight(&mut ctx, DType::F32, &[M, N_EXPERT], 4);
    let sinks = weight(&mut ctx, DType::F32, &[1], 5);
    let x = ctx.tensor(DType::F32, [K, N_TOKENS]).unwrap();
    ctx.set_input(x).unwrap();
    let logits = ctx.mul_mat(router, x).unwrap();
    let ids = ctx.top_k(logits, N_USED).unwrap();
    let probs = ctx.soft_max_ext_sinks(logits, None, sinks, 1.0, 0.0).unwrap();
    let xs = ctx.reshape(x, [K, 1, N_TOKENS, 1]).unwrap();
    let product = ctx.mul_mat_id(gate, xs, ids).unwrap();
    let g = ctx.add_id(product, gate_bias, ids).unwrap();
    let u = ctx.mul_mat_id(up, xs, ids).unwrap();
    let act = ctx.swiglu_oai_split(g, u, 1.702, 7.0).unwrap();
    for t in [act, probs] {
        ctx.set_output(t).unwrap();
    }
    Block { ctx, x, outs: [act, probs], watched: [ids, product, g, probs, u] }
}

/// The outputs, the number of splits and the backend of each watched node.
fn run(backends: &[Arc<dyn Backend>], input: &[f32]) -> (Vec<Vec<f32>>, usize, Vec<String>) {
    let mut b = build(&backends[0]);
    let mut sched = Scheduler::new(backends, SchedulerParams::default()).unwrap();
    let arena = GraphArena::new();
    let graph = b.ctx.build_graph(&arena, &b.outs).unwrap();
    sched.alloc_graph(&mut b.ctx, graph).unwrap();
    b.ctx.set_f32(b.x, input).unwrap();
    sched.graph_compute(&mut b.ctx, graph).unwrap();
    let outs = b.outs.iter().map(|&t| b.ctx.read_f32(t).unwrap()).collect();
    let splits = sched.n_splits();
    let placed =
        b.watched.iter().map(|&t| sched.tensor_backend(t).map_or("?".into(), |be| be.name().to_string())).collect();
    sched.release(&mut b.ctx).unwrap();
    (outs, splits, placed)
}

#[test]
fn an_expert_block_split_between_wgpu_and_the_cpu_agrees_with_the_cpu() {
    let dev = device_or_skip!();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let gpu = dev.init_backend(None).unwrap();
    let input = values(K * N_TOKENS, 77, -1.0, 1.0);
    let (want, _, _) = run(std::slice::from_ref(&cpu), &input);
    let (got, splits, placed) = run(&[gpu.clone(), cpu.clone()], &input);
    assert!(splits >= 2, "the IQ4_NL product runs on the CPU, the rest on wgpu: {splits} splits");
    let expected = [gpu.name(), gpu.name(), gpu.name(), gpu.name(), cpu.name()];
    assert_eq!(
        placed, expected,
        "TOP_K, MUL_MAT_ID, ADD_ID, the sink SOFT_MAX on wgpu; the IQ4_NL MUL_MAT_ID (host weights) on the CPU"
    );
    // The CPU multiplies Q8_0 weights with activations quantized to Q8_0,
    // wgpu with F32 ones: ggml's MUL_MAT tolerance (NMSE 5e-4).
    let (err, norm) = got[0]
        .iter()
        .zip(&want[0])
        .fold((0f64, 0f64), |(e, n), (&g, &w)| (e + f64::from(g - w).powi(2), n + f64::from(w).powi(2)));
    assert!(norm > 0.0 && err / norm < 5e-4, "experts (wgpu): NMSE {}", err / norm);
    assert_close("router softmax with a sink (wgpu)", &got[1], &want[1], 1e-6, 1e-6);
    // The sink takes part of each token's probability mass.
    for row in want[1].chunks(N_EXPERT) {
        let total: f32 = row.iter().sum();
        assert!(total > 0.0 && total < 1.0, "{total}");
    }
}
