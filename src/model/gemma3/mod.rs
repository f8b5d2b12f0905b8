//! The Gemma 3 family (`general.architecture = gemma3`): token embeddings
//! scaled by `sqrt(n_embd)`, RMS norms before and after attention and the
//! feed-forward network, RMS norms on each query and key head, rope on
//! pairs half a head apart, five sliding-window layers (their own rope
//! base) to each global one, GeGLU, output tied to the embeddings. Its
//! configuration of the shared decoder, read from GGUF metadata as
//! llama.cpp's `llm_build_gemma3_iswa` does.

use gantry_engine::RopeMode;

use crate::Result;
use crate::model::blocks::{FeedForwardKind, NormKind};
use crate::model::decoder::DecoderHparams;
use crate::model::gguf::Gguf;
use crate::model::llama::common_shape;

/// One layer in this many is global when the file does not say
/// (`gemma3.attention.sliding_window_pattern`; llama.cpp's default).
pub const DEFAULT_SWA_PATTERN: usize = 6;
/// The rope base of sliding-window layers when the file does not say
/// (`gemma3.rope.freq_base_swa`; llama.cpp's default).
pub const DEFAULT_ROPE_BASE_SWA: f32 = 10000.0;

/// The `gemma3.*` keys this family reads beyond the common ones.
pub const KEYS: &[&str] = &[
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "rope.freq_base_swa",
    "attn_logit_softcapping",
    "final_logit_softcapping",
];

/// Reads a `gemma3` GGUF file's hyperparameters. The converter stores the
/// norms' weights as `1 + w`, so they are plain RMS norms here.
pub fn hparams_from_gguf(gguf: &Gguf) -> Result<DecoderHparams> {
    let shape = common_shape(gguf)?;
    Ok(DecoderHparams {
        arch: "gemma3",
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Geglu,
        rope_mode: RopeMode::Neox,
        rope_base: gguf.get_arch_positive("rope.freq_base")?.unwrap_or(1_000_000.0),
        rope_base_swa: gguf.get_arch_positive("rope.freq_base_swa")?.unwrap_or(DEFAULT_ROPE_BASE_SWA),
        embd_scale: (shape.n_embd as f32).sqrt(),
        qk_norm: true,
        post_norms: true,
        // Gemma scales queries by 1/sqrt(head_dim) (query_pre_attn_scalar = head_dim).
        kq_scale: Some(1.0 / (shape.head_dim as f32).sqrt()),
        attn_softcap: gguf.get_arch_non_negative("attn_logit_softcapping")?.unwrap_or(0.0),
        final_softcap: gguf.get_arch_non_negative("final_logit_softcapping")?.unwrap_or(0.0),
        sliding_window: gguf.get_arch_positive_count_req("attention.sliding_window", gguf.limits().max_context)?,
        swa_pattern: gguf
            .get_arch_count("attention.sliding_window_pattern", gguf.limits().max_layers)?
            .unwrap_or(DEFAULT_SWA_PATTERN),
        ..shape
    })
}
