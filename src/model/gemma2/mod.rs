//! The Gemma 2 family (`general.architecture = gemma2`): token embeddings
//! scaled by `sqrt(n_embd)`, RMS norms before and after attention and the
//! feed-forward network, rope on pairs half a head apart (one base for
//! every layer), sliding-window layers alternating with global ones (the
//! even layers slide), attention logits and final logits soft-capped,
//! GeGLU, output tied to the embeddings. Its configuration of the shared
//! decoder, read from GGUF metadata as llama.cpp's `llm_build_gemma2_iswa`
//! does.

use gantry_engine::RopeMode;

use crate::Result;
use crate::model::blocks::{FeedForwardKind, NormKind};
use crate::model::decoder::DecoderHparams;
use crate::model::gguf::Gguf;
use crate::model::llama::common_shape;

/// The `gemma2.*` keys this family reads beyond the common ones.
pub const KEYS: &[&str] = &["attention.sliding_window", "attn_logit_softcapping", "final_logit_softcapping"];

/// Attention logits are soft-capped at this when the file does not say
/// (`gemma2.attn_logit_softcapping`; llama.cpp's default).
pub const DEFAULT_ATTN_SOFTCAP: f32 = 50.0;
/// Final logits are soft-capped at this when the file does not say
/// (`gemma2.final_logit_softcapping`; llama.cpp's default).
pub const DEFAULT_FINAL_SOFTCAP: f32 = 30.0;

/// Reads a `gemma2` GGUF file's hyperparameters. The converter stores the
/// norms' weights as `1 + w`, so they are plain RMS norms here.
pub fn hparams_from_gguf(gguf: &Gguf) -> Result<DecoderHparams> {
    let shape = common_shape(gguf)?;
    let rope_base = gguf.get_arch_positive("rope.freq_base")?.unwrap_or(10000.0);
    // Queries are scaled by 1/sqrt(query_pre_attn_scalar): the head width,
    // except in the 27B model (46 layers), where it is n_embd / n_head
    // (llama.cpp decides by the layer count the same way).
    let query_scalar = if shape.n_layer == 46 { shape.n_embd / shape.n_head.max(1) } else { shape.head_dim };
    Ok(DecoderHparams {
        arch: "gemma2",
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Geglu,
        rope_mode: RopeMode::Neox,
        rope_base,
        rope_base_swa: rope_base,
        embd_scale: (shape.n_embd as f32).sqrt(),
        post_norms: true,
        kq_scale: Some(1.0 / (query_scalar as f32).sqrt()),
        attn_softcap: gguf.get_arch_positive("attn_logit_softcapping")?.unwrap_or(DEFAULT_ATTN_SOFTCAP),
        final_softcap: gguf.get_arch_positive("final_logit_softcapping")?.unwrap_or(DEFAULT_FINAL_SOFTCAP),
        sliding_window: gguf.get_arch_positive_count_req("attention.sliding_window", gguf.limits().max_context)?,
        swa_pattern: 2,
        ..shape
    })
}
