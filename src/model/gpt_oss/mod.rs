//! The gpt-oss family (`general.architecture = gpt-oss`: gpt-oss-20b,
//! gpt-oss-120b), as llama.cpp computes it (`LLM_ARCH_OPENAI_MOE`, its
//! graph in `src/models/openai-moe.cpp`): RMS norms; attention with biases on the Q/K/V and output projections
//! and one learned sink logit per head (`attn_sinks.weight`), rope on pairs
//! half a head apart with YaRN scaling on every layer; the even layers
//! attend over a sliding window (`attention.sliding_window`), the odd ones
//! over the whole past; in every layer a mixture of experts: a router with
//! a bias, the `expert_used_count` best experts by raw logit weighted by a
//! softmax over the chosen logits alone (not normalized again), each
//! expert's gate, up and down projections with biases and gpt-oss's
//! clamped SwiGLU between them. The norm before the experts is stored as
//! `post_attention_norm`; the output matrix is untied.

use gantry_engine::RopeMode;

use crate::model::blocks::{ExpertActivation, FeedForwardKind, Gating, NormKind};
use crate::model::decoder::DecoderHparams;
use crate::model::gguf::Gguf;
use crate::model::llama::{common_shape, expert_counts};
use crate::{Error, Result};

/// The `gpt-oss.*` keys this family reads beyond the common ones.
pub const KEYS: &[&str] = &[
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "expert_feed_forward_length",
    "rope.freq_base_swa",
    "rope.scaling.attn_factor",
    "rope.scaling.yarn_beta_fast",
    "rope.scaling.yarn_beta_slow",
];

/// gpt-oss's SwiGLU: the gate's multiplier inside the sigmoid (llama.cpp
/// fixes it in `build_moe_ffn`; no key carries it).
pub const SWIGLU_ALPHA: f32 = 1.702;

/// gpt-oss's SwiGLU clamp (fixed in llama.cpp as the alpha is).
pub const SWIGLU_LIMIT: f32 = 7.0;

/// YaRN's correction dimensions as llama.cpp computes every model's rope
/// (`yarn_beta_fast`, `yarn_beta_slow`): it reads the converter's keys for
/// them only in Grok files, so a gpt-oss file that says otherwise is
/// computed one way by llama.cpp and another by the model's authors.
const YARN_BETAS: [(&str, f32); 2] = [("rope.scaling.yarn_beta_fast", 32.0), ("rope.scaling.yarn_beta_slow", 1.0)];

/// Even layers slide, odd ones attend globally (llama.cpp's pattern of 2
/// for this architecture, unless the file gives another).
const DEFAULT_SWA_PATTERN: usize = 2;

/// Reads a `gpt-oss` GGUF file's hyperparameters. Errors name the file and
/// the key or tensor.
pub fn hparams_from_gguf(gguf: &Gguf) -> Result<DecoderHparams> {
    let shape = common_shape(gguf)?;
    let invalid = |reason: String| Error::InvalidModel { file: gguf.source().to_owned(), reason };
    let (n_expert, n_expert_used) = expert_counts(gguf)?;
    if n_expert == 0 {
        return Err(invalid(format!(
            "{}: a gpt-oss model needs experts, the file has none",
            gguf.arch_key("expert_count")?
        )));
    }
    // llama.cpp requires the output matrix of this architecture: a file
    // without one is not a gpt-oss model it would run.
    if !gguf.has_tensor("output.weight") {
        return Err(invalid("tensor 'output.weight' is missing (gpt-oss has an untied output matrix)".into()));
    }
    for (suffix, want) in YARN_BETAS {
        if let Some(v) = gguf.get_arch_opt::<f32>(suffix)?
            && v != want
        {
            return Err(invalid(format!(
                "{} = {v}: llama.cpp computes gpt-oss's YaRN with {want} whatever the file says; another value is \
                 not implemented",
                gguf.arch_key(suffix)?
            )));
        }
    }
    let l = *gguf.limits();
    let rope_base = gguf.get_arch_positive("rope.freq_base")?.unwrap_or(10000.0);
    let yarn = gguf.get_arch_opt::<&str>("rope.scaling.type")? == Some("yarn");
    // The factor as llama.cpp keeps it, as a position scale: the global
    // layers drop it under scaling type "none" (`common_shape`), the
    // sliding ones keep it whatever the type says (llama.cpp copies the
    // trained scale to them before the context decides on the type).
    let freq_scale_file = gguf.get_arch_positive("rope.scaling.factor")?.map_or(1.0, |f| 1.0 / f);
    let rope_ext_factor = if yarn { 1.0 } else { 0.0 };
    let rope_attn_factor = yarn_attn_factor(yarn, shape.rope_freq_scale)
        * gguf.get_arch_positive("rope.scaling.attn_factor")?.unwrap_or(1.0);
    Ok(DecoderHparams {
        arch: "gpt-oss",
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Swiglu,
        rope_mode: RopeMode::Neox,
        rope_base,
        rope_base_swa: gguf.get_arch_positive("rope.freq_base_swa")?.unwrap_or(rope_base),
        rope_freq_scale_swa: freq_scale_file,
        rope_ext_factor,
        rope_attn_factor,
        n_ctx_orig_yarn: gguf.get_arch_count("rope.scaling.original_context_length", l.max_context)?.unwrap_or(0),
        sliding_window: gguf.get_arch_positive_count_req("attention.sliding_window", l.max_context)?,
        swa_pattern: gguf
            .get_arch_count("attention.sliding_window_pattern", l.max_layers)?
            .unwrap_or(DEFAULT_SWA_PATTERN),
        qkv_bias: gguf.has_tensor("blk.0.attn_q.bias"),
        attn_out_bias: true,
        attn_sinks: true,
        ffn_norm_name: "post_attention_norm",
        n_expert,
        n_expert_used,
        n_ff_exp: gguf.get_arch_count_req("expert_feed_forward_length", l.max_width)?,
        expert_gating: Gating::SoftmaxSelected,
        expert_biases: true,
        expert_norm_weights: false,
        expert_activation: ExpertActivation::SwigluOai { alpha: SWIGLU_ALPHA, limit: SWIGLU_LIMIT },
        ..shape
    })
}

/// The attention factor llama.cpp hands the rope of a YaRN model without a
/// log multiplier: YaRN's magnitude scale `1 + 0.1 ln(factor)`, divided by
/// the same because the rope op multiplies it in again (`llama_context`'s
/// set-up; computed in f32 in its order, so the product is llama.cpp's to
/// the bit). 1 without YaRN.
fn yarn_attn_factor(yarn: bool, freq_scale: f32) -> f32 {
    if !yarn {
        return 1.0;
    }
    let factor = 1.0 / freq_scale;
    let mscale = if factor <= 1.0 { 1.0 } else { 0.1 * factor.ln() + 1.0 };
    mscale * (1.0 / (1.0 + 0.1 * factor.ln()))
}
