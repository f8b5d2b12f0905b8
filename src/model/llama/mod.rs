//! The llama family (`general.architecture = llama`: Llama, SmolLM2, ...):
//! RMS norms, rope on adjacent pairs, grouped-query causal attention,
//! SwiGLU. Its configuration of the shared decoder, read from GGUF metadata.

use crate::Result;
use crate::model::blocks::{FeedForwardKind, NormKind};
use crate::model::decoder::DecoderHparams;
use crate::model::gguf::Gguf;
use gantry_engine::RopeMode;

/// Reads a `llama` GGUF file's hyperparameters (`llama.embedding_length`, ...).
pub fn hparams_from_gguf(gguf: &Gguf) -> Result<DecoderHparams> {
    let shape = common_shape(gguf)?;
    Ok(DecoderHparams {
        arch: "llama",
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Swiglu,
        rope_mode: RopeMode::Normal,
        rope_base: gguf.get_arch_positive("rope.freq_base")?.unwrap_or(10000.0),
        ..shape
    })
}

/// The sizes every decoder family's GGUF metadata gives the same way
/// (`{arch}.embedding_length`, `.block_count`, `.attention.head_count`, ...);
/// the rest is llama's (no embedding scale, no extra norms, no sliding window).
pub(crate) fn common_shape(gguf: &Gguf) -> Result<DecoderHparams> {
    let n_embd: u32 = gguf.get_arch("embedding_length")?;
    let n_head: u32 = gguf.get_arch("attention.head_count")?;
    let n_head_kv: u32 = gguf.get_arch_opt("attention.head_count_kv")?.unwrap_or(n_head);
    let head_dim: u32 = match gguf.get_arch_opt("attention.key_length")? {
        Some(d) => d,
        None if n_head > 0 => n_embd / n_head,
        None => 0,
    };
    let n_vocab = match gguf.get_arch_opt::<u32>("vocab_size")? {
        Some(n) => n as usize,
        None => gguf.tensor("token_embd.weight")?.dims().get(1).copied().unwrap_or(0),
    };
    Ok(DecoderHparams {
        n_vocab,
        n_embd: n_embd as usize,
        n_layer: gguf.get_arch::<u32>("block_count")? as usize,
        n_head: n_head as usize,
        n_head_kv: n_head_kv as usize,
        head_dim: head_dim as usize,
        n_ff: gguf.get_arch::<u32>("feed_forward_length")? as usize,
        rms_eps: gguf
            .get_arch_positive("attention.layer_norm_rms_epsilon")?
            .map_or_else(|| gguf.get_arch("attention.layer_norm_rms_epsilon"), Ok)?,
        rope_freq_scale: gguf.get_arch_positive("rope.scaling.factor")?.map_or(1.0, |f| 1.0 / f),
        n_ctx_train: gguf.get_arch_opt::<u32>("context_length")?.unwrap_or(2048) as usize,
        ..DecoderHparams::SMOLLM2_135M
    })
}
