//! The configuration of a decoder-only transformer: its sizes and which of
//! the shared blocks each part uses. A family (`llama`, `gemma3`) is a way
//! of reading this from a file.

use gantry_engine::{Limits, RopeMode};

use crate::Error;
use crate::model::blocks::{ExpertActivation, ExpertsSpec, FeedForwardKind, Gating, MaskRule, NormKind, RopeSpec};

/// Most experts a layer may have (llama.cpp's `LLAMA_MAX_EXPERTS`).
pub const MAX_EXPERTS: usize = 512;

/// The shape of a decoder model and the blocks it is built from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecoderHparams {
    /// The family's name (`general.architecture`), for messages.
    pub arch: &'static str,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Width of the residual stream.
    pub n_embd: usize,
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_head`).
    pub n_head_kv: usize,
    /// Width of each head.
    pub head_dim: usize,
    /// Hidden width of the feed-forward network.
    pub n_ff: usize,
    /// Norm epsilon.
    pub rms_eps: f32,
    /// The norms' kind.
    pub norm: NormKind,
    /// The feed-forward network's kind.
    pub ffn: FeedForwardKind,
    /// Rope pairing.
    pub rope_mode: RopeMode,
    /// Rope frequency base (global layers).
    pub rope_base: f32,
    /// Rope position scale (1 = none; global layers).
    pub rope_freq_scale: f32,
    /// Rope position scale of sliding-window layers (Gemma: 1, unscaled;
    /// gpt-oss: the global layers' scale).
    pub rope_freq_scale_swa: f32,
    /// YaRN's extrapolation mix (0: no YaRN; 1 with `rope.scaling.type =
    /// yarn`), on every layer.
    pub rope_ext_factor: f32,
    /// Multiplies the rotated queries and keys (YaRN's attention factor as
    /// llama.cpp passes it to the rope: the op adds YaRN's own magnitude
    /// scale), on every layer.
    pub rope_attn_factor: f32,
    /// The context the rope's YaRN ramp is computed for
    /// (`rope.scaling.original_context_length`); 0: `n_ctx_train`.
    pub n_ctx_orig_yarn: usize,
    /// Context length the model was trained with.
    pub n_ctx_train: usize,
    /// Multiplies the token embeddings (Gemma: `sqrt(n_embd)`).
    pub embd_scale: f32,
    /// RMS norms on each head's queries and keys before rope (Gemma 3).
    pub qk_norm: bool,
    /// Norms after attention and after the feed-forward network, before
    /// their residual additions (Gemma 2 and 3).
    pub post_norms: bool,
    /// Multiplies `Q·K`; `None` is `1 / sqrt(head_dim)`.
    pub kq_scale: Option<f32>,
    /// Attention logit soft-capping (0 = off).
    pub attn_softcap: f32,
    /// Output logit soft-capping (0 = off).
    pub final_softcap: f32,
    /// Keys a sliding-window layer sees (0 = every layer global).
    pub sliding_window: usize,
    /// Every `swa_pattern`-th layer is global, the others slide (Gemma 3: 6).
    pub swa_pattern: usize,
    /// Rope frequency base of sliding-window layers.
    pub rope_base_swa: f32,
    /// Biases on the query, key and value projections (Qwen 2; optional in
    /// llama files).
    pub qkv_bias: bool,
    /// A bias on the attention output projection (`attn_output.bias`, gpt-oss).
    pub attn_out_bias: bool,
    /// One learned logit per query head that joins every attention softmax
    /// with no value of its own (`attn_sinks.weight`, gpt-oss).
    pub attn_sinks: bool,
    /// The name of each layer's norm before the feed-forward network:
    /// `ffn_norm`, or `post_attention_norm` in gpt-oss files (llama.cpp's
    /// `attn_post_norm`, which gpt-oss applies to the residual, as a pre-norm).
    pub ffn_norm_name: &'static str,
    /// Per-pair rope frequency factors (`rope_freqs.weight`, Llama 3's
    /// long-context scaling): each pair's frequency is divided by its
    /// factor, in every layer.
    pub rope_factors: bool,
    /// One `attn_qkv` matrix instead of three (Phi 3).
    pub fused_qkv: bool,
    /// The gate's rows stacked into `ffn_up` instead of an `ffn_gate`
    /// (Phi 3).
    pub fused_gate_up: bool,
    /// Experts in each layer's feed-forward network; 0: a dense network
    /// of width `n_ff`.
    pub n_expert: usize,
    /// Experts each token runs through (0 when dense).
    pub n_expert_used: usize,
    /// Hidden width of each expert's network.
    pub n_ff_exp: usize,
    /// How the router's logits become the chosen experts' weights.
    pub expert_gating: Gating,
    /// Biases on the router and on each expert's three projections
    /// (`ffn_gate_inp.bias`, `ffn_{gate,up,down}_exps.bias`; gpt-oss).
    pub expert_biases: bool,
    /// Whether the chosen experts' weights are normalized to sum 1.
    pub expert_norm_weights: bool,
    /// Each expert's activation.
    pub expert_activation: ExpertActivation,
}

impl DecoderHparams {
    /// SmolLM2-135M's shape (the default workload and the benches use it).
    pub const SMOLLM2_135M: Self = Self {
        arch: "llama",
        n_vocab: 49152,
        n_embd: 576,
        n_layer: 30,
        n_head: 9,
        n_head_kv: 3,
        head_dim: 64,
        n_ff: 1536,
        rms_eps: 1e-5,
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Swiglu,
        rope_mode: RopeMode::Normal,
        rope_base: 100000.0,
        rope_freq_scale: 1.0,
        rope_freq_scale_swa: 1.0,
        rope_ext_factor: 0.0,
        rope_attn_factor: 1.0,
        n_ctx_orig_yarn: 0,
        n_ctx_train: 8192,
        embd_scale: 1.0,
        qk_norm: false,
        post_norms: false,
        kq_scale: None,
        attn_softcap: 0.0,
        final_softcap: 0.0,
        sliding_window: 0,
        swa_pattern: 0,
        rope_base_swa: 10000.0,
        qkv_bias: false,
        attn_out_bias: false,
        attn_sinks: false,
        ffn_norm_name: "ffn_norm",
        rope_factors: false,
        fused_qkv: false,
        fused_gate_up: false,
        n_expert: 0,
        n_expert_used: 0,
        n_ff_exp: 0,
        expert_gating: Gating::Softmax,
        expert_biases: false,
        expert_norm_weights: false,
        expert_activation: ExpertActivation::Swiglu,
    };

    /// Whether layer `l` attends over a sliding window.
    pub fn is_sliding(&self, l: usize) -> bool {
        self.sliding_window > 0 && (self.swa_pattern == 0 || !(l + 1).is_multiple_of(self.swa_pattern))
    }

    /// Whether any layer slides (the graph then takes a second mask).
    pub fn has_sliding_layers(&self) -> bool {
        (0..self.n_layer).any(|l| self.is_sliding(l))
    }

    /// Whether any layer attends over the whole past (the graph then takes
    /// the global mask): not so for a sliding-window model of fewer layers
    /// than its pattern.
    pub fn has_global_layers(&self) -> bool {
        (0..self.n_layer).any(|l| !self.is_sliding(l))
    }

    /// The mask rule of layer `l`.
    pub fn mask_rule(&self, l: usize) -> MaskRule {
        MaskRule { causal: true, window: if self.is_sliding(l) { self.sliding_window } else { 0 } }
    }

    /// The rope of layer `l`: sliding layers have their own base and scale;
    /// YaRN, where the model has it, acts on every layer (as llama.cpp's
    /// context-wide `ext_factor` and `attn_factor` do).
    pub fn rope(&self, l: usize) -> RopeSpec {
        let (base, freq_scale) = if self.is_sliding(l) {
            (self.rope_base_swa, self.rope_freq_scale_swa)
        } else {
            (self.rope_base, self.rope_freq_scale)
        };
        RopeSpec {
            mode: self.rope_mode,
            n_dims: self.head_dim,
            base,
            freq_scale,
            n_ctx_orig: if self.n_ctx_orig_yarn > 0 { self.n_ctx_orig_yarn } else { self.n_ctx_train },
            ext_factor: self.rope_ext_factor,
            attn_factor: self.rope_attn_factor,
        }
    }

    /// The mixture-of-experts network of every layer, or `None` for a
    /// dense model.
    pub fn experts(&self) -> Option<ExpertsSpec> {
        (self.n_expert > 0).then_some(ExpertsSpec {
            n_expert: self.n_expert,
            n_expert_used: self.n_expert_used,
            gating: self.expert_gating,
            normalize_weights: self.expert_norm_weights,
            activation: self.expert_activation,
        })
    }

    /// The attention scale.
    pub fn kq_scale(&self) -> f32 {
        self.kq_scale.unwrap_or(1.0 / (self.head_dim as f32).sqrt())
    }

    /// Checks that the numbers fit together.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |what: &str| Err(Error::Model(format!("invalid {} hyperparameters: {what}", self.arch)));
        if [self.n_vocab, self.n_embd, self.n_layer, self.n_head, self.n_head_kv, self.head_dim, self.n_ff].contains(&0)
        {
            return bad("a size is zero");
        }
        // Hyperparameters built in code meet the bounds the GGUF reader
        // holds a file's to (each sizes a `Vec` or a loop somewhere).
        let l = Limits::DEFAULT;
        let bounds = [
            ("n_layer", self.n_layer, l.max_layers),
            ("n_vocab", self.n_vocab, l.max_vocab),
            ("n_ctx_train", self.n_ctx_train, l.max_context),
            ("n_ctx_orig_yarn", self.n_ctx_orig_yarn, l.max_context),
            ("sliding_window", self.sliding_window, l.max_context),
            ("swa_pattern", self.swa_pattern, l.max_layers),
            ("n_embd", self.n_embd, l.max_width),
            ("n_head", self.n_head, l.max_width),
            ("n_head_kv", self.n_head_kv, l.max_width),
            ("head_dim", self.head_dim, l.max_width),
            ("n_ff", self.n_ff, l.max_width),
            ("n_ff_exp", self.n_ff_exp, l.max_width),
            ("n_expert", self.n_expert, MAX_EXPERTS),
        ];
        if let Some((what, n, max)) = bounds.into_iter().find(|&(_, n, max)| n > max) {
            return bad(&format!("{what} = {n} is more than the {max} allowed"));
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            return bad("n_head is not a multiple of n_head_kv");
        }
        if self.n_expert > 0 && !(1..=self.n_expert).contains(&self.n_expert_used) {
            return bad("n_expert_used must be between 1 and n_expert");
        }
        if self.n_expert > 0 && self.n_ff_exp == 0 {
            return bad("the experts' width n_ff_exp is zero");
        }
        if self.n_expert == 0 && self.n_expert_used != 0 {
            return bad("n_expert_used is set in a model without experts");
        }
        if let ExpertActivation::SwigluOai { alpha, limit } = self.expert_activation
            && !(alpha.is_finite() && limit.is_finite() && limit > 0.0)
        {
            return bad("the experts' SwiGLU alpha and limit must be finite, the limit positive");
        }
        if !self.head_dim.is_multiple_of(2) {
            return bad(&format!("the head size {} is odd (rope turns pairs of values)", self.head_dim));
        }
        let positive = |x: f32| x.is_finite() && x > 0.0;
        let rope = [self.rope_base, self.rope_freq_scale, self.rope_base_swa, self.rope_freq_scale_swa];
        if ![self.rms_eps, self.rope_attn_factor].into_iter().chain(rope).all(positive) {
            return bad("rms_eps, rope bases, rope scales and the rope attention factor must be finite and positive");
        }
        if !(self.rope_ext_factor.is_finite() && (0.0..=1.0).contains(&self.rope_ext_factor)) {
            return bad("the YaRN extrapolation mix must be between 0 and 1");
        }
        if !(self.embd_scale.is_finite() && self.attn_softcap >= 0.0 && self.final_softcap >= 0.0) {
            return bad("the embedding scale must be finite, soft-caps non-negative");
        }
        // Gemma's post-attention norm and gpt-oss's pre-FFN norm share a name.
        if self.post_norms && self.ffn_norm_name == "post_attention_norm" {
            return bad("the norm before the feed-forward network is named as the post-attention norm");
        }
        if self.norm == NormKind::Layer {
            return bad("decoder norms are RMS norms (LayerNorm needs biases the decoder weights do not have)");
        }
        Ok(())
    }
}
