//! The llama family (`general.architecture = llama`: Llama, SmolLM2,
//! Mixtral, ...): RMS norms, rope on adjacent pairs, grouped-query causal
//! attention, SwiGLU, or a mixture of SwiGLU experts where the file has
//! them (Mixtral). Its configuration of the shared decoder, read from GGUF
//! metadata.

use crate::model::blocks::{ExpertActivation, FeedForwardKind, Gating, NormKind};
use crate::model::decoder::{DecoderHparams, MAX_EXPERTS};
use crate::model::gguf::Gguf;
use crate::{Error, Result};
use gantry_engine::RopeMode;

/// The `llama.*` keys this family reads beyond the common ones
/// ([`crate::model::decoder`]'s accounting refuses any other).
pub const KEYS: &[&str] = &["attention.sliding_window"];

/// Reads a `llama` GGUF file's hyperparameters (`llama.embedding_length`,
/// ...). Three parts are the file's choice, as in llama.cpp: Llama 3's rope
/// frequency factors (`rope_freqs.weight`), biases on the Q/K/V
/// projections (`blk.N.attn_q.bias`, ...), and experts (Mixtral: a
/// positive `llama.expert_count`): each layer's network is then a softmax router over the
/// experts, the `expert_used_count` best per token with their weights
/// normalized to sum 1, SwiGLU experts as wide as `feed_forward_length`
/// (llama.cpp's `llm_build_llama` with `build_moe_ffn`).
///
/// A positive `llama.attention.sliding_window` W is Mistral 7B's
/// sliding-window attention on every layer: a token sees itself and the
/// W − 1 before it (Hugging Face's Mistral, and llama.cpp's rule where it
/// has windows). llama.cpp's `llama` graph ignores the key — its converters
/// never write it for llama files, and 0 means no window — so on a prompt
/// longer than W llama.cpp and Gantry differ, Gantry as the model was
/// trained; `tests/models/family_reference.rs` checks the window against a
/// float64 forward.
pub fn hparams_from_gguf(gguf: &Gguf) -> Result<DecoderHparams> {
    let shape = common_shape(gguf)?;
    let (n_expert, n_expert_used) = expert_counts(gguf)?;
    let sliding_window = gguf.get_arch_count("attention.sliding_window", gguf.limits().max_context)?.unwrap_or(0);
    let rope_base = gguf.get_arch_positive("rope.freq_base")?.unwrap_or(10000.0);
    Ok(DecoderHparams {
        n_expert,
        n_expert_used,
        n_ff_exp: if n_expert > 0 { shape.n_ff } else { 0 },
        expert_gating: Gating::Softmax,
        expert_norm_weights: true,
        expert_activation: ExpertActivation::Swiglu,
        arch: "llama",
        norm: NormKind::Rms,
        ffn: FeedForwardKind::Swiglu,
        rope_mode: RopeMode::Normal,
        rope_base,
        rope_factors: gguf.has_tensor("rope_freqs.weight"),
        qkv_bias: gguf.has_tensor("blk.0.attn_q.bias"),
        sliding_window,
        // Every layer slides, with the one rope of the model.
        swa_pattern: 0,
        rope_base_swa: rope_base,
        rope_freq_scale_swa: shape.rope_freq_scale,
        ..shape
    })
}

/// The experts per layer and the experts each token uses
/// (`{arch}.expert_count`, `.expert_used_count`; both 0 when missing), at
/// most [`MAX_EXPERTS`] and the second at most the first: errors name the
/// file and the key.
pub(crate) fn expert_counts(gguf: &Gguf) -> Result<(usize, usize)> {
    let n_expert = gguf.get_arch_count("expert_count", MAX_EXPERTS)?.unwrap_or(0);
    let n_used = gguf.get_arch_count("expert_used_count", MAX_EXPERTS)?.unwrap_or(0);
    if n_used > n_expert || (n_expert > 0 && n_used == 0) {
        return Err(Error::InvalidModel {
            file: gguf.source().to_owned(),
            reason: format!(
                "{} = {n_used} with {} = {n_expert}: each token must use at least one of the experts and at most all",
                gguf.arch_key("expert_used_count")?,
                gguf.arch_key("expert_count")?
            ),
        });
    }
    Ok((n_expert, n_used))
}

/// The sizes every decoder family's GGUF metadata gives the same way
/// (`{arch}.embedding_length`, `.block_count`, `.attention.head_count`, ...);
/// the rest is llama's (no embedding scale, no extra norms, no sliding window).
pub(crate) fn common_shape(gguf: &Gguf) -> Result<DecoderHparams> {
    // Every size is bounded before it sizes anything: the layer count a
    // `Vec` per layer, the context the KV cache and the masks, the widths
    // the tensors checked against them.
    let l = *gguf.limits();
    let n_embd = gguf.get_arch_count_req("embedding_length", l.max_width)?;
    let n_head = gguf.get_arch_count_req("attention.head_count", l.max_width)?;
    let n_head_kv = gguf.get_arch_count("attention.head_count_kv", l.max_width)?.unwrap_or(n_head);
    let head_dim = match gguf.get_arch_count("attention.key_length", l.max_width)? {
        Some(d) => d,
        // Without the key, a head is the width over the heads: a width they
        // do not divide is the file's error, named by its keys.
        None if n_head > 0 && !n_embd.is_multiple_of(n_head) => {
            return Err(Error::InvalidModel {
                file: gguf.source().to_owned(),
                reason: format!(
                    "{} = {n_embd} is not a multiple of {} = {n_head} (and no {} gives the head size)",
                    gguf.arch_key("embedding_length")?,
                    gguf.arch_key("attention.head_count")?,
                    gguf.arch_key("attention.key_length")?,
                ),
            });
        }
        None if n_head > 0 => n_embd / n_head,
        None => 0,
    };
    let n_vocab = match gguf.get_arch_count("vocab_size", l.max_vocab)? {
        Some(n) => n,
        None => {
            let rows = gguf.tensor("token_embd.weight")?.dims().get(1).copied().unwrap_or(0);
            l.check_count("the rows of token_embd.weight", rows as u64, l.max_vocab)
                .map_err(|reason| Error::InvalidModel { file: gguf.source().to_owned(), reason })?
        }
    };
    Ok(DecoderHparams {
        n_vocab,
        n_embd,
        n_layer: gguf.get_arch_count_req("block_count", l.max_layers)?,
        n_head,
        n_head_kv,
        head_dim,
        n_ff: gguf.get_arch_count_req("feed_forward_length", l.max_width)?,
        rms_eps: gguf
            .get_arch_positive("attention.layer_norm_rms_epsilon")?
            .map_or_else(|| gguf.get_arch("attention.layer_norm_rms_epsilon"), Ok)?,
        // Linear scaling by the factor (llama.cpp's default type); scaling
        // type "none" never scales, whatever the factor says.
        rope_freq_scale: match gguf.get_arch_opt::<&str>("rope.scaling.type")? {
            Some("none") => 1.0,
            _ => gguf.get_arch_positive("rope.scaling.factor")?.map_or(1.0, |f| 1.0 / f),
        },
        n_ctx_train: gguf.get_arch_count("context_length", l.max_context)?.unwrap_or(2048),
        ..DecoderHparams::SMOLLM2_135M
    })
}
