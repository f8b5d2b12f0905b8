//! The Phi 3 family (`general.architecture = phi3`: Phi-3, Phi-3.5,
//! Phi-4 mini and Phi-4): llama's blocks with one fused query/key/value
//! matrix (`attn_qkv`), the gate stacked into the up projection
//! (`ffn_up` of twice the FFN width), rope on pairs half a head apart and an
//! untied output (llama.cpp's `llm_build_phi3`).
//!
//! `phi3.attention.sliding_window` is read and not applied, as llama.cpp
//! does not apply it to this family: Gantry computes what llama.cpp does.
//! The long-context variants' `rope_factors_long` / `rope_factors_short`
//! (LongRoPE) are not implemented; a file with them is refused by name.

use gantry_engine::RopeMode;

use crate::Result;
use crate::model::blocks::{FeedForwardKind, NormKind};
use crate::model::decoder::DecoderHparams;
use crate::model::gguf::Gguf;
use crate::model::llama::common_shape;

/// The `phi3.*` keys this family reads beyond the common ones.
pub const KEYS: &[&str] = &["attention.sliding_window"];

/// Reads a `phi3` GGUF file's hyperparameters.
pub fn hparams_from_gguf(gguf: &Gguf) -> Result<DecoderHparams> {
    let shape = common_shape(gguf)?;
    Ok(DecoderHparams {
        arch: "phi3",
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Swiglu,
        rope_mode: RopeMode::Neox,
        rope_base: gguf.get_arch_positive("rope.freq_base")?.unwrap_or(10000.0),
        fused_qkv: true,
        fused_gate_up: true,
        ..shape
    })
}
