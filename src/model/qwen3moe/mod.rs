//! The Qwen 3 mixture-of-experts family (`general.architecture =
//! qwen3moe`: Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen 3's attention (an RMS
//! norm on each query and key head before rope, rope on pairs half a head
//! apart, heads of `qwen3moe.attention.key_length`) and, in every layer, a
//! mixture of experts instead of the dense network: a softmax router over
//! `expert_count` experts, the `expert_used_count` best per token, their
//! weights normalized to sum 1, SwiGLU experts of width
//! `expert_feed_forward_length` (llama.cpp's `llm_build_qwen3moe`). No
//! shared experts. The output matrix is tied to the embeddings when the
//! file has none.

use gantry_engine::RopeMode;

use crate::model::blocks::{ExpertActivation, FeedForwardKind, Gating, NormKind};
use crate::model::decoder::DecoderHparams;
use crate::model::gguf::Gguf;
use crate::model::llama::{common_shape, expert_counts};
use crate::{Error, Result};

/// The `qwen3moe.*` keys this family reads beyond the common ones.
pub const KEYS: &[&str] = &["expert_feed_forward_length"];

/// Reads a `qwen3moe` GGUF file's hyperparameters. The experts' width
/// defaults to `feed_forward_length / expert_used_count`, as in llama.cpp.
pub fn hparams_from_gguf(gguf: &Gguf) -> Result<DecoderHparams> {
    let shape = common_shape(gguf)?;
    let (n_expert, n_expert_used) = expert_counts(gguf)?;
    if n_expert == 0 || n_expert_used == 0 {
        return Err(Error::InvalidModel {
            file: gguf.source().to_owned(),
            reason: format!(
                "{}: a qwen3moe model needs experts, the file says {n_expert} with {n_expert_used} used per token",
                gguf.arch_key("expert_count")?
            ),
        });
    }
    let n_ff_exp = gguf
        .get_arch_count("expert_feed_forward_length", gguf.limits().max_width)?
        .unwrap_or(shape.n_ff / n_expert_used);
    Ok(DecoderHparams {
        arch: "qwen3moe",
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Swiglu,
        rope_mode: RopeMode::Neox,
        rope_base: gguf.get_arch_positive("rope.freq_base")?.unwrap_or(10000.0),
        qk_norm: true,
        n_expert,
        n_expert_used,
        n_ff_exp,
        expert_gating: Gating::Softmax,
        expert_norm_weights: true,
        expert_activation: ExpertActivation::Swiglu,
        ..shape
    })
}
