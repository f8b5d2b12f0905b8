//! The Qwen 2 family (`general.architecture = qwen2`: Qwen 2, Qwen 2.5):
//! llama's blocks with biases on the query, key and value projections and
//! rope on pairs half a head apart (llama.cpp's `llm_build_qwen2`). The
//! output matrix is tied to the embeddings when the file has none.

use gantry_engine::RopeMode;

use crate::Result;
use crate::model::blocks::{FeedForwardKind, NormKind};
use crate::model::decoder::DecoderHparams;
use crate::model::gguf::Gguf;
use crate::model::llama::common_shape;

/// The `qwen2.*` keys this family reads beyond the common ones.
pub const KEYS: &[&str] = &[];

/// Reads a `qwen2` GGUF file's hyperparameters.
pub fn hparams_from_gguf(gguf: &Gguf) -> Result<DecoderHparams> {
    let shape = common_shape(gguf)?;
    Ok(DecoderHparams {
        arch: "qwen2",
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Swiglu,
        rope_mode: RopeMode::Neox,
        rope_base: gguf.get_arch_positive("rope.freq_base")?.unwrap_or(10000.0),
        qkv_bias: true,
        ..shape
    })
}
