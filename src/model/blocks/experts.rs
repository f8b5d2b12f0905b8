//! A mixture-of-experts feed-forward network (llama.cpp's `build_moe_ffn`):
//! a router scores every expert for each token, the `n_expert_used` best
//! are chosen, each chosen expert's gated network runs on the token, and
//! the results are summed, weighted by the router's probabilities.

use gantry_engine::{Context, TensorId};

use crate::{Error, Result};

/// How the router's logits become the chosen experts' weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gating {
    /// Softmax over every expert; the chosen ones keep their probabilities
    /// (Mixtral, Qwen 3 MoE; llama.cpp's `SOFTMAX`).
    Softmax,
    /// The experts are chosen by their raw logits, then a softmax over the
    /// chosen logits alone gives the weights (gpt-oss; llama.cpp's
    /// `SOFTMAX_WEIGHT`).
    SoftmaxSelected,
}

/// The gated activation of each expert's network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ExpertActivation {
    /// `silu(gate) * up`.
    Swiglu,
    /// gpt-oss's SwiGLU: `g * sigmoid(alpha g) * (u + 1)` with the gate
    /// `g` clamped from above and the up projection `u` on both sides at
    /// `limit` (ggml's `SWIGLU_OAI`).
    SwigluOai {
        /// Multiplies the gate inside the sigmoid (gpt-oss: 1.702).
        alpha: f32,
        /// The clamp (gpt-oss: 7).
        limit: f32,
    },
}

/// The sizes and choices of one mixture-of-experts network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpertsSpec {
    /// Experts in the layer.
    pub n_expert: usize,
    /// Experts each token runs through.
    pub n_expert_used: usize,
    /// Router logits to weights.
    pub gating: Gating,
    /// Whether the chosen experts' weights are divided by their sum (so
    /// they add up to 1) before they multiply the experts' outputs.
    pub normalize_weights: bool,
    /// Each expert's activation.
    pub activation: ExpertActivation,
}

/// One mixture-of-experts network's weights. The expert tensors stack one
/// matrix per expert along their third dimension; the biases one row per
/// expert along their second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Experts {
    /// Router `[n_embd, n_expert]` (`ffn_gate_inp`).
    pub router: TensorId,
    /// Router bias `[n_expert]` (gpt-oss).
    pub router_bias: Option<TensorId>,
    /// Gate projections `[n_embd, n_ff_exp, n_expert]` (`ffn_gate_exps`).
    pub gate: TensorId,
    /// Gate biases `[n_ff_exp, n_expert]`.
    pub gate_bias: Option<TensorId>,
    /// Up projections `[n_embd, n_ff_exp, n_expert]` (`ffn_up_exps`).
    pub up: TensorId,
    /// Up biases `[n_ff_exp, n_expert]`.
    pub up_bias: Option<TensorId>,
    /// Down projections `[n_ff_exp, n_embd, n_expert]` (`ffn_down_exps`).
    pub down: TensorId,
    /// Down biases `[n_embd, n_expert]`.
    pub down_bias: Option<TensorId>,
}

impl Experts {
    /// Every tensor, each once.
    pub fn tensors(&self) -> impl Iterator<Item = TensorId> + '_ {
        [Some(self.router), Some(self.gate), Some(self.up), Some(self.down)]
            .into_iter()
            .chain([self.router_bias, self.gate_bias, self.up_bias, self.down_bias])
            .flatten()
    }

    /// The same roles over other tensors.
    pub fn map(&self, f: impl Fn(TensorId) -> TensorId) -> Self {
        Self {
            router: f(self.router),
            router_bias: self.router_bias.map(&f),
            gate: f(self.gate),
            gate_bias: self.gate_bias.map(&f),
            up: f(self.up),
            up_bias: self.up_bias.map(&f),
            down: f(self.down),
            down_bias: self.down_bias.map(&f),
        }
    }
}

/// The smallest sum the chosen weights are divided by (the smallest normal
/// F16, as llama.cpp clamps it): a token whose chosen probabilities all
/// underflow gets large weights, never a division by zero.
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

/// The network applied to `x` (`[n_embd, n_tokens]`, contiguous); the
/// result has `x`'s shape.
pub fn experts(ctx: &mut Context, w: &Experts, spec: &ExpertsSpec, x: TensorId) -> Result<TensorId> {
    let (n_expert, n_used) = (spec.n_expert, spec.n_expert_used);
    if n_used == 0 || n_used > n_expert {
        return Err(Error::Model(format!("experts: {n_used} of {n_expert} experts used per token ({spec:?})")));
    }
    let [n_embd, n_tokens, ..] = ctx.desc(x)?.ne;

    let mut logits = ctx.mul_mat(w.router, x)?; // [n_expert, n_tokens]
    if let Some(b) = w.router_bias {
        logits = ctx.add(logits, b)?;
    }
    // The experts are chosen by what the weights are taken from: the
    // probabilities, or (softmax of the chosen) the logits themselves,
    // whose order is the same.
    let probs = match spec.gating {
        Gating::Softmax => ctx.soft_max(logits)?,
        Gating::SoftmaxSelected => logits,
    };
    let selected = ctx.top_k(probs, n_used)?; // I32 [n_used, n_tokens]

    // Each token's chosen entries, as rows of one value.
    let probs = ctx.reshape(probs, [1, n_expert, n_tokens])?;
    let mut weights = ctx.get_rows(probs, selected)?; // [1, n_used, n_tokens]
    if spec.gating == Gating::SoftmaxSelected {
        let flat = ctx.reshape(weights, [n_used, n_tokens])?;
        let flat = ctx.soft_max(flat)?;
        weights = ctx.reshape(flat, [1, n_used, n_tokens])?;
    }
    if spec.normalize_weights {
        let flat = ctx.reshape(weights, [n_used, n_tokens])?;
        let sum = ctx.sum_rows(flat)?; // [1, n_tokens]
        let sum = ctx.clamp(sum, MIN_WEIGHT_SUM, f32::INFINITY)?;
        let flat = ctx.div(flat, sum)?;
        weights = ctx.reshape(flat, [1, n_used, n_tokens])?;
    }

    // One activation row per token, shared by its chosen experts.
    let x = ctx.reshape(x, [n_embd, 1, n_tokens])?;
    let with_bias = |ctx: &mut Context, y: TensorId, bias: Option<TensorId>| match bias {
        Some(b) => ctx.add_id(y, b, selected),
        None => Ok(y),
    };
    let up = ctx.mul_mat_id(w.up, x, selected)?; // [n_ff_exp, n_used, n_tokens]
    let up = with_bias(ctx, up, w.up_bias)?;
    let gate = ctx.mul_mat_id(w.gate, x, selected)?;
    let gate = with_bias(ctx, gate, w.gate_bias)?;
    let act = match spec.activation {
        ExpertActivation::Swiglu => ctx.swiglu_split(gate, up)?,
        ExpertActivation::SwigluOai { alpha, limit } => ctx.swiglu_oai_split(gate, up, alpha, limit)?,
    };
    let down = ctx.mul_mat_id(w.down, act, selected)?; // [n_embd, n_used, n_tokens]
    let down = with_bias(ctx, down, w.down_bias)?;
    let weighted = ctx.mul(down, weights)?;

    // The sum over the chosen experts, slot by slot in llama.cpp's order
    // (views of each slot's rows, added to the running sum).
    let row = ctx.desc(weighted)?.nb[1];
    let token = ctx.desc(weighted)?.nb[2];
    let mut out = ctx.view_2d(weighted, n_embd, n_tokens, token, 0)?;
    for slot in 1..n_used {
        let next = ctx.view_2d(weighted, n_embd, n_tokens, token, slot * row)?;
        out = ctx.add(out, next)?;
    }
    // One slot's view strides over the others' rows: the caller gets
    // contiguous rows either way.
    if n_used == 1 {
        out = ctx.cont(out)?;
    }
    Ok(out)
}
