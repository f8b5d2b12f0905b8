//! The Qwen 3 family (`general.architecture = qwen3`, dense): llama's
//! blocks with an RMS norm on each query and key head before rope, rope on
//! pairs half a head apart, and heads whose width
//! (`qwen3.attention.key_length`) need not be the model's width over the
//! heads (llama.cpp's `llm_build_qwen3`). No biases. The output matrix is
//! tied to the embeddings when the file has none.

use gantry_engine::RopeMode;

use crate::Result;
use crate::model::blocks::{FeedForwardKind, NormKind};
use crate::model::decoder::DecoderHparams;
use crate::model::gguf::Gguf;
use crate::model::llama::common_shape;

/// The `qwen3.*` keys this family reads beyond the common ones.
pub const KEYS: &[&str] = &[];

/// Reads a `qwen3` GGUF file's hyperparameters.
pub fn hparams_from_gguf(gguf: &Gguf) -> Result<DecoderHparams> {
    let shape = common_shape(gguf)?;
    Ok(DecoderHparams {
        arch: "qwen3",
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Swiglu,
        rope_mode: RopeMode::Neox,
        rope_base: gguf.get_arch_positive("rope.freq_base")?.unwrap_or(10000.0),
        qk_norm: true,
        ..shape
    })
}
