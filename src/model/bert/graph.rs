//! The BERT forward graph for a batch of sentences padded to one length.

use gantry_engine::{Context, DType, TensorId};

use super::{BertConfig, BertWeights};
use crate::model::blocks::{Attention, AttentionSpec, attend, feed_forward, linear, normalize};
use crate::{Error, Result};

/// A built encoder graph: its inputs and its output.
#[derive(Debug, Clone, Copy)]
pub struct BertGraph {
    /// Token ids, I32 `[n_tokens * n_seq]` (sentence after sentence, each padded to `n_tokens`).
    pub tokens: TensorId,
    /// Positions, I32 `[n_tokens * n_seq]`.
    pub positions: TensorId,
    /// Token types, I32 `[n_tokens * n_seq]`.
    pub token_types: TensorId,
    /// Attention mask, F16 `[n_tokens, n_tokens, 1, n_seq]`: -inf for padding keys.
    pub mask: TensorId,
    /// Pooling weights, F32 `[n_tokens, 1, n_seq]`: `1 / length` for a
    /// sentence's tokens, 0 for padding.
    pub pooling: TensorId,
    /// The sentence embeddings, F32 `[hidden, n_seq]` (L2-normalised unless
    /// the folder's `modules.json` lists no `Normalize`).
    pub embeddings: TensorId,
    /// Tokens per sentence (after padding).
    pub n_tokens: usize,
    /// Sentences.
    pub n_seq: usize,
}

fn input(ctx: &mut Context, dtype: DType, shape: &[usize], name: &str) -> Result<TensorId> {
    let t = ctx.tensor(dtype, shape)?;
    ctx.set_name(t, name)?;
    ctx.set_input(t)?;
    Ok(t)
}

/// Builds the encoder over `n_seq` sentences of `n_tokens` tokens each
/// (Hugging Face's `BertModel` + sentence-transformers' mean pooling and
/// normalisation): embeddings summed and LayerNormed; per layer Q/K/V
/// projections with biases, bidirectional attention over each sentence's
/// own tokens (padding masked), output projection, residual, LayerNorm,
/// GELU feed-forward, residual, LayerNorm; then the mean of each sentence's
/// hidden states and, when `l2_normalize`, L2 normalisation.
pub fn build_bert_graph(
    ctx: &mut Context,
    cfg: &BertConfig,
    w: &BertWeights,
    n_tokens: usize,
    n_seq: usize,
    attention: Attention,
    l2_normalize: bool,
) -> Result<BertGraph> {
    if n_tokens == 0 || n_seq == 0 || n_tokens > cfg.max_position_embeddings {
        return Err(Error::Model(format!(
            "a batch of {n_seq} sentences of {n_tokens} tokens does not fit an encoder of {} positions",
            cfg.max_position_embeddings
        )));
    }
    let (h, nh, hd) = (cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim());
    let n = n_tokens * n_seq;
    let tokens = input(ctx, DType::I32, &[n], "inp_tokens")?;
    let positions = input(ctx, DType::I32, &[n], "inp_pos")?;
    let token_types = input(ctx, DType::I32, &[n], "inp_token_types")?;
    let mask = input(ctx, DType::F16, &[n_tokens, n_tokens, 1, n_seq], "kq_mask")?;
    let pooling = input(ctx, DType::F32, &[n_tokens, 1, n_seq], "inp_pooling")?;
    let spec = AttentionSpec {
        n_head: nh,
        n_head_kv: nh,
        head_dim: hd,
        kq_scale: 1.0 / (hd as f32).sqrt(),
        softcap: 0.0,
        attention,
    };

    let words = ctx.get_rows(w.word_embeddings, tokens)?;
    let pos = ctx.get_rows(w.position_embeddings, positions)?;
    let types = ctx.get_rows(w.token_type_embeddings, token_types)?;
    let x = ctx.add(words, pos)?;
    let x = ctx.add(x, types)?;
    let mut x = normalize(ctx, x, &w.embeddings_norm)?;
    ctx.set_name(x, "embd")?;
    for (l, lw) in w.layers.iter().enumerate() {
        // [head_dim, n_head, n_tokens, n_seq] for queries; keys and values
        // with the tokens second, [head_dim, n_tokens, n_head, n_seq].
        let heads = |ctx: &mut Context, (wt, b): (TensorId, TensorId)| -> Result<TensorId> {
            let y = linear(ctx, wt, Some(b), x)?;
            Ok(ctx.reshape(y, [hd, nh, n_tokens, n_seq])?)
        };
        let q = heads(ctx, lw.q)?;
        let k = heads(ctx, lw.k)?;
        let k = ctx.permute(k, [0, 2, 1, 3])?;
        let v = heads(ctx, lw.v)?;
        let v = ctx.permute(v, [0, 2, 1, 3])?;
        let attn = attend(ctx, &spec, q, k, v, mask, None)?;
        let attn = linear(ctx, lw.attn_out.0, Some(lw.attn_out.1), attn)?;
        let res = ctx.add(attn, x)?;
        let cur = normalize(ctx, res, &lw.attn_norm)?;
        let ffn = feed_forward(ctx, &lw.ffn, cur)?;
        let res = ctx.add(ffn, cur)?;
        x = normalize(ctx, res, &lw.ffn_norm)?;
        ctx.set_name(x, &format!("l_out-{l}"))?;
    }
    // Mean pooling as a product: [n_tokens, hidden, n_seq]^T · [n_tokens, 1, n_seq].
    let x = ctx.reshape(x, [h, n_tokens, n_seq])?;
    let xt = ctx.transpose(x)?;
    let xt = ctx.cont(xt)?;
    let pooled = ctx.mul_mat(xt, pooling)?;
    let pooled = ctx.reshape(pooled, [h, n_seq])?;
    let embeddings = if l2_normalize {
        // x / |x| = rms_norm(x) / sqrt(hidden).
        let normed = ctx.rms_norm(pooled, 1e-12 / h as f32)?;
        ctx.scale(normed, 1.0 / (h as f32).sqrt(), 0.0)?
    } else {
        pooled
    };
    ctx.set_name(embeddings, "embeddings")?;
    ctx.set_output(embeddings)?;
    Ok(BertGraph { tokens, positions, token_types, mask, pooling, embeddings, n_tokens, n_seq })
}
