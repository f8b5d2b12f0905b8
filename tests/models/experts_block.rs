//! The mixture-of-experts block (`gantry::model::blocks::experts`) against
//! a plain-Rust reference of llama.cpp's `build_moe_ffn`, on the CPU, in
//! every configuration the block offers: softmax gating with normalized
//! weights and SwiGLU (Mixtral, Qwen 3 MoE), and gpt-oss's softmax of the
//! chosen logits with a router bias, per-expert biases and the clamped
//! SWIGLU_OAI. The families' files check the first against llama.cpp
//! itself (`family_reference.rs`); this checks every branch.

use std::sync::Arc;

use gantry::backends::cpu::CpuBackend;
use gantry::model::blocks::{ExpertActivation, Experts, ExpertsSpec, Gating, experts};
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::{Backend, Context, DType, GraphArena, SplitMix64, TensorId};

const N_EMBD: usize = 8;
const N_FF: usize = 6;
const N_EXPERT: usize = 4;
const N_USED: usize = 2;
const N_TOKENS: usize = 5;

/// A tensor's values, row-major in ggml's order (`ne[0]` fastest).
struct Values {
    id: TensorId,
    data: Vec<f32>,
}

fn tensor(ctx: &mut Context, rng: &mut SplitMix64, shape: &[usize], scale: f32) -> Values {
    let id = ctx.tensor(DType::F32, shape).unwrap();
    ctx.set_input(id).unwrap();
    let data = (0..shape.iter().product()).map(|_| scale * rng.uniform()).collect();
    Values { id, data }
}

fn dot(w: &[f32], x: &[f32]) -> f32 {
    w.iter().zip(x).map(|(a, b)| a * b).sum()
}

fn softmax(v: &[f32]) -> Vec<f32> {
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = v.iter().map(|x| (x - max).exp()).collect();
    let sum: f32 = e.iter().sum();
    e.iter().map(|x| x / sum).collect()
}

/// llama.cpp's `build_moe_ffn`, one token at a time.
fn reference(
    spec: &ExpertsSpec,
    x: &[f32],
    router: &[f32],
    router_bias: Option<&[f32]>,
    [gate, up, down]: [&[f32]; 3],
    [gate_b, up_b, down_b]: [Option<&[f32]>; 3],
) -> Vec<f32> {
    let mut out = vec![0f32; N_EMBD * N_TOKENS];
    for (t, x) in x.chunks(N_EMBD).enumerate() {
        let logits: Vec<f32> = (0..N_EXPERT)
            .map(|e| dot(&router[e * N_EMBD..][..N_EMBD], x) + router_bias.map_or(0.0, |b| b[e]))
            .collect();
        let probs = if spec.gating == Gating::Softmax { softmax(&logits) } else { logits };
        let mut order: Vec<usize> = (0..N_EXPERT).collect();
        order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
        let chosen = &order[..spec.n_expert_used];
        let mut weights: Vec<f32> = chosen.iter().map(|&e| probs[e]).collect();
        if spec.gating == Gating::SoftmaxSelected {
            weights = softmax(&weights);
        }
        if spec.normalize_weights {
            let sum: f32 = weights.iter().sum();
            weights.iter_mut().for_each(|w| *w /= sum.max(6.1e-5));
        }
        for (&e, w) in chosen.iter().zip(weights) {
            let bias = |b: Option<&[f32]>, n: usize, j: usize| b.map_or(0.0, |b| b[e * n + j]);
            let act: Vec<f32> = (0..N_FF)
                .map(|j| {
                    let g = dot(&gate[(e * N_FF + j) * N_EMBD..][..N_EMBD], x) + bias(gate_b, N_FF, j);
                    let u = dot(&up[(e * N_FF + j) * N_EMBD..][..N_EMBD], x) + bias(up_b, N_FF, j);
                    match spec.activation {
                        ExpertActivation::Swiglu => g / (1.0 + (-g).exp()) * u,
                        ExpertActivation::SwigluOai { alpha, limit } => {
                            let (g, u) = (g.min(limit), u.clamp(-limit, limit));
                            g / (1.0 + (-alpha * g).exp()) * (u + 1.0)
                        }
                    }
                })
                .collect();
            for i in 0..N_EMBD {
                let y = dot(&down[(e * N_EMBD + i) * N_FF..][..N_FF], &act) + bias(down_b, N_EMBD, i);
                out[t * N_EMBD + i] += w * y;
            }
        }
    }
    out
}

/// The block's output and the reference's on seeded weights, `biases`
/// giving the router and every expert projection a bias.
fn run(spec: &ExpertsSpec, biases: bool, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut ctx = Context::new();
    let mut rng = SplitMix64::new(seed);
    let x = tensor(&mut ctx, &mut rng, &[N_EMBD, N_TOKENS], 1.0);
    // Router logits spread over a few units: every token's choice is clear.
    let router = tensor(&mut ctx, &mut rng, &[N_EMBD, N_EXPERT], 1.5);
    let gate = tensor(&mut ctx, &mut rng, &[N_EMBD, N_FF, N_EXPERT], 0.8);
    let up = tensor(&mut ctx, &mut rng, &[N_EMBD, N_FF, N_EXPERT], 0.8);
    let down = tensor(&mut ctx, &mut rng, &[N_FF, N_EMBD, N_EXPERT], 0.8);
    let mut bias = |shape: &[usize]| biases.then(|| tensor(&mut ctx, &mut rng, shape, 0.5));
    let (router_b, gate_b, up_b, down_b) =
        (bias(&[N_EXPERT]), bias(&[N_FF, N_EXPERT]), bias(&[N_FF, N_EXPERT]), bias(&[N_EMBD, N_EXPERT]));
    let id = |v: &Option<Values>| v.as_ref().map(|v| v.id);
    let w = Experts {
        router: router.id,
        router_bias: id(&router_b),
        gate: gate.id,
        gate_bias: id(&gate_b),
        up: up.id,
        up_bias: id(&up_b),
        down: down.id,
        down_bias: id(&down_b),
    };
    let out = experts(&mut ctx, &w, spec, x.id).unwrap();
    assert_eq!(ctx.desc(out).unwrap().ne, [N_EMBD, N_TOKENS, 1, 1]);

    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[out]).unwrap();
    let mut sched = Scheduler::new(std::slice::from_ref(&cpu), SchedulerParams::default()).unwrap();
    sched.alloc_graph(&mut ctx, graph).unwrap();
    let all =
        [&x, &router, &gate, &up, &down].into_iter().chain([&router_b, &gate_b, &up_b, &down_b].into_iter().flatten());
    for v in all {
        ctx.set_f32(v.id, &v.data).unwrap();
    }
    sched.graph_compute(&mut ctx, graph).unwrap();
    let got = ctx.read_f32(out).unwrap();

    let data = |v: &Option<Values>| v.as_ref().map(|v| v.data.clone());
    let (rb, gb, ub, db) = (data(&router_b), data(&gate_b), data(&up_b), data(&down_b));
    let want = reference(
        spec,
        &x.data,
        &router.data,
        rb.as_deref(),
        [&gate.data, &up.data, &down.data],
        [gb.as_deref(), ub.as_deref(), db.as_deref()],
    );
    (got, want)
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    let worst = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    eprintln!("{what}: largest difference {worst:e} of values up to {scale}");
    assert!(worst <= 1e-4 * scale.max(1.0), "{what}: {got:?}\nwant {want:?}");
}

#[test]
fn softmax_gating_with_normalized_weights_matches_the_reference() {
    let spec = ExpertsSpec {
        n_expert: N_EXPERT,
        n_expert_used: N_USED,
        gating: Gating::Softmax,
        normalize_weights: true,
        activation: ExpertActivation::Swiglu,
    };
    let (got, want) = run(&spec, false, 1);
    assert_close(&got, &want, "softmax, normalized, SwiGLU");
    // Unnormalized weights give another answer: the flag is read.
    let (got, _) = run(&ExpertsSpec { normalize_weights: false, ..spec }, false, 1);
    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst > 1e-2, "normalizing changed nothing ({worst})");
}

#[test]
fn gpt_oss_gating_biases_and_clamped_swiglu_match_the_reference() {
    // A limit of 1.5 clamps part of the gates and up projections.
    let spec = ExpertsSpec {
        n_expert: N_EXPERT,
        n_expert_used: N_USED,
        gating: Gating::SoftmaxSelected,
        normalize_weights: false,
        activation: ExpertActivation::SwigluOai { alpha: 1.702, limit: 1.5 },
    };
    let (got, want) = run(&spec, true, 2);
    assert_close(&got, &want, "softmax of the chosen, biases, SWIGLU_OAI");
    let (one, want_one) = run(&ExpertsSpec { n_expert_used: 1, ..spec }, true, 2);
    assert_close(&one, &want_one, "one expert per token");
}
