//! The forward graph of a decoder model for one batch of tokens.

use gantry_engine::{Context, DType, Limits, TensorId};

use super::weights::{FfnWeights, QkvWeights, decoder_norm};
use super::{DecoderHparams, DecoderWeights, KvCache, LayerWeights};
use crate::model::blocks::{Attention, AttentionSpec, attend, experts, feed_forward, linear, normalize};
use crate::{Error, Result};

/// Which positions get logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogitsFor {
    /// Every token of the batch (scoring, `gantry logits`).
    All,
    /// The last token only (generation).
    Last,
    /// This many tokens, named by the graph's `outputs` input (batches of
    /// several sequences).
    Rows(usize),
}

impl LogitsFor {
    /// Rows of logits a batch of `n_tokens` gives.
    pub fn n_outputs(self, n_tokens: usize) -> usize {
        match self {
            LogitsFor::All => n_tokens,
            LogitsFor::Last => 1,
            LogitsFor::Rows(n) => n,
        }
    }
}

/// The shape of one forward batch: what decides a graph's structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchShape {
    /// Tokens per batch.
    pub n_tokens: usize,
    /// Cache cells attended over (the first `n_kv` of the cache).
    pub n_kv: usize,
    /// Which positions get logits.
    pub logits_for: LogitsFor,
    /// How attention is computed.
    pub attention: Attention,
}

/// A built forward graph: its inputs, to write before each compute, and its
/// output.
#[derive(Debug, Clone, Copy)]
pub struct DecoderGraph {
    /// Token ids, I32 `[n_tokens]`.
    pub tokens: TensorId,
    /// Positions, I32 `[n_tokens]`.
    pub positions: TensorId,
    /// Cache cells the batch's keys and values go to, I32 `[n_tokens]`.
    pub kv_slots: TensorId,
    /// Attention mask of global layers, F16 `[n_kv, n_tokens]`: 0 where
    /// token `i` may see cache cell `j`, -inf elsewhere (`None` when every
    /// layer slides).
    pub mask: Option<TensorId>,
    /// Attention mask of sliding-window layers (models that have them).
    pub mask_swa: Option<TensorId>,
    /// The batch rows whose logits are computed, I32 `[n]` (`LogitsFor::Rows`).
    pub outputs: Option<TensorId>,
    /// Logits, F32 `[n_vocab, n_outputs]`.
    pub logits: TensorId,
    /// The batch shape it was built for.
    pub shape: BatchShape,
}

fn input(ctx: &mut Context, dtype: DType, shape: &[usize], name: &str) -> Result<TensorId> {
    let t = ctx.tensor(dtype, shape)?;
    ctx.set_name(t, name)?;
    ctx.set_input(t)?;
    Ok(t)
}

/// Builds the forward pass of a decoder model (llama.cpp's `llm_build_llama`,
/// `llm_build_gemma3_iswa`): embeddings (scaled where the model says),
/// then per layer a norm, Q/K/V projections (with biases where the model
/// has them), per-head Q/K norms where the
/// model has them, the layer's rope (with the model's frequency factors and
/// YaRN), the new keys and values stored into the
/// cache with SET_ROWS, grouped-query attention over the first `n_kv` cache
/// cells with the layer's mask (global or sliding window; flash or explicit,
/// [`Attention`]; with attention sinks where the model has them), output
/// projection (with its bias where the model has one), a post-norm where the model has one,
/// residual; a norm, the feed-forward network (dense, or a mixture of
/// experts: [`experts`]), a post-norm, residual; then
/// the final norm, the output projection and the logit soft-cap.
pub fn build_decoder_graph(
    ctx: &mut Context,
    hp: &DecoderHparams,
    w: &DecoderWeights,
    kv: &KvCache,
    shape: BatchShape,
) -> Result<DecoderGraph> {
    let BatchShape { n_tokens, n_kv, logits_for, attention } = shape;
    if n_tokens == 0 || n_kv == 0 || n_kv > kv.n_ctx || n_tokens > n_kv {
        return Err(Error::Model(format!(
            "a batch of {n_tokens} tokens over {n_kv} cache cells does not fit a cache of {}",
            kv.n_ctx
        )));
    }
    let n_outputs = logits_for.n_outputs(n_tokens);
    if n_outputs == 0 || n_outputs > n_tokens {
        return Err(Error::Model(format!("{n_outputs} rows of logits asked of a batch of {n_tokens} tokens")));
    }
    // The masks hold n_kv × n_tokens entries, filled on the host, and the
    // logits n_vocab × n_outputs, read back to it.
    Limits::DEFAULT
        .check_shape(&[n_kv, n_tokens])
        .map_err(|e| Error::Model(format!("the attention mask of a batch of {n_tokens} tokens: {e}")))?;
    Limits::DEFAULT
        .check_shape(&[hp.n_vocab, n_outputs])
        .map_err(|e| Error::Model(format!("the logits of {n_outputs} tokens: {e}")))?;
    let (hd, nh, nkv) = (hp.head_dim, hp.n_head, hp.n_head_kv);
    let kv_width = hd * nkv;
    let tokens = input(ctx, DType::I32, &[n_tokens], "inp_tokens")?;
    let positions = input(ctx, DType::I32, &[n_tokens], "inp_pos")?;
    let kv_slots = input(ctx, DType::I32, &[n_tokens], "inp_kv_slots")?;
    // Each mask only when a layer reads it: an input no node uses is left
    // out of the graph, so the scheduler never allocates it and writing it
    // fails (a Gemma 3 of fewer layers than its sliding pattern has no
    // global layer, one with `swa_pattern` 1 no sliding one).
    let mask = if hp.has_global_layers() { Some(input(ctx, DType::F16, &[n_kv, n_tokens], "kq_mask")?) } else { None };
    let mask_swa =
        if hp.has_sliding_layers() { Some(input(ctx, DType::F16, &[n_kv, n_tokens], "kq_mask_swa")?) } else { None };
    let outputs = match logits_for {
        LogitsFor::Rows(n) => Some(input(ctx, DType::I32, &[n], "inp_out_ids")?),
        LogitsFor::All | LogitsFor::Last => None,
    };
    let spec = AttentionSpec {
        n_head: nh,
        n_head_kv: nkv,
        head_dim: hd,
        kq_scale: hp.kq_scale(),
        softcap: hp.attn_softcap,
        attention,
    };
    let cache_row = kv.dtype.row_size(kv_width).unwrap_or(0);
    let head_row = kv.dtype.row_size(hd).unwrap_or(0);

    let mut x = ctx.get_rows(w.tok_embd, tokens)?;
    if hp.embd_scale != 1.0 {
        x = ctx.scale(x, hp.embd_scale, 0.0)?;
    }
    ctx.set_name(x, "embd")?;
    for (l, lw) in w.layers.iter().enumerate() {
        let name = |ctx: &mut Context, t: TensorId, s: &str| ctx.set_name(t, &format!("{s}-{l}"));
        let rope = hp.rope(l);
        let cur = normalize(ctx, x, &decoder_norm(hp, lw.attn_norm))?;
        name(ctx, cur, "attn_norm")?;

        let (q, k, v) = project_qkv(ctx, hp, lw, cur, n_tokens)?;
        let mut q = q;
        if let Some(qn) = lw.attn_q_norm {
            q = normalize(ctx, q, &decoder_norm(hp, qn))?;
        }
        let q = rope.apply(ctx, q, positions, w.rope_freqs)?;
        name(ctx, q, "Qcur")?;
        let mut k = k;
        if let Some(kn) = lw.attn_k_norm {
            k = normalize(ctx, k, &decoder_norm(hp, kn))?;
        }
        let k = rope.apply(ctx, k, positions, w.rope_freqs)?;
        name(ctx, k, "Kcur")?;
        name(ctx, v, "Vcur")?;

        let k_rows = ctx.reshape(k, [kv_width, n_tokens])?;
        let k_stored = ctx.set_rows(kv.k[l], k_rows, kv_slots)?;
        let v_stored = ctx.set_rows(kv.v[l], v, kv_slots)?;
        // Views of the stored caches (not of the cache leafs) so the stores run first.
        let k_all = ctx.view_3d(k_stored, [hd, n_kv, nkv], cache_row, head_row, 0)?;
        let v_all = ctx.view_3d(v_stored, [hd, n_kv, nkv], cache_row, head_row, 0)?;
        let layer_mask = if hp.is_sliding(l) { mask_swa } else { mask };
        // `has_global_layers` / `has_sliding_layers` made the mask this layer reads.
        let layer_mask = layer_mask.ok_or_else(|| Error::Model(format!("layer {l} has no attention mask")))?;
        let attn = attend(ctx, &spec, q, k_all, v_all, layer_mask, lw.attn_sinks)?;
        name(ctx, attn, "kqv_out")?;
        let mut attn = linear(ctx, lw.wo, lw.bo, attn)?;
        if let Some(pn) = lw.attn_post_norm {
            attn = normalize(ctx, attn, &decoder_norm(hp, pn))?;
        }
        name(ctx, attn, "attn_out")?;
        let ffn_inp = ctx.add(x, attn)?;
        name(ctx, ffn_inp, "ffn_inp")?;

        let cur = normalize(ctx, ffn_inp, &decoder_norm(hp, lw.ffn_norm))?;
        name(ctx, cur, "ffn_norm")?;
        let mut down = match (&lw.ffn, hp.experts()) {
            (FfnWeights::Dense { .. }, _) => match lw.feed_forward(hp) {
                Some(ffn) => feed_forward(ctx, &ffn, cur)?,
                None => return Err(Error::Model(format!("layer {l} has no dense feed-forward network"))),
            },
            (FfnWeights::Experts(e), Some(spec)) => experts(ctx, e, &spec, cur)?,
            (FfnWeights::Experts(_), None) => {
                return Err(Error::Model(format!("layer {l} has experts, but {} has no expert count", hp.arch)));
            }
        };
        if let Some(pn) = lw.ffn_post_norm {
            down = normalize(ctx, down, &decoder_norm(hp, pn))?;
        }
        name(ctx, down, "ffn_out")?;
        x = ctx.add(ffn_inp, down)?;
        name(ctx, x, "l_out")?;
    }
    match (logits_for, outputs) {
        (LogitsFor::Last, _) if n_tokens > 1 => {
            let row = ctx.desc(x)?.nb[1];
            x = ctx.view_2d(x, hp.n_embd, 1, row, (n_tokens - 1) * row)?;
        }
        (LogitsFor::Rows(_), Some(rows)) => x = ctx.get_rows(x, rows)?,
        _ => {}
    }
    let cur = normalize(ctx, x, &decoder_norm(hp, w.output_norm))?;
    ctx.set_name(cur, "result_norm")?;
    let mut logits = ctx.mul_mat(w.output, cur)?;
    if hp.final_softcap > 0.0 {
        logits = ctx.scale(logits, 1.0 / hp.final_softcap, 0.0)?;
        logits = ctx.tanh(logits)?;
        logits = ctx.scale(logits, hp.final_softcap, 0.0)?;
    }
    ctx.set_name(logits, "result_output")?;
    ctx.set_output(logits)?;
    Ok(DecoderGraph { tokens, positions, kv_slots, mask, mask_swa, outputs, logits, shape })
}

/// Queries `[head_dim, n_head, n_tokens]`, keys `[head_dim, n_head_kv,
/// n_tokens]` and values `[n_head_kv * head_dim, n_tokens]` of the normed
/// input `cur`: three products with their biases, or one fused product
/// whose rows are split by views (no copy).
fn project_qkv(
    ctx: &mut Context,
    hp: &DecoderHparams,
    lw: &LayerWeights,
    cur: TensorId,
    n_tokens: usize,
) -> Result<(TensorId, TensorId, TensorId)> {
    let (hd, nh, nkv) = (hp.head_dim, hp.n_head, hp.n_head_kv);
    match lw.qkv {
        QkvWeights::Separate { wq, wk, wv } => {
            let q = linear(ctx, wq, lw.bq, cur)?;
            let q = ctx.reshape(q, [hd, nh, n_tokens])?;
            let k = linear(ctx, wk, lw.bk, cur)?;
            let k = ctx.reshape(k, [hd, nkv, n_tokens])?;
            Ok((q, k, linear(ctx, wv, lw.bv, cur)?))
        }
        QkvWeights::Fused(wqkv) => {
            let qkv = ctx.mul_mat(wqkv, cur)?;
            let row = ctx.desc(qkv)?.nb[1];
            // The product is F32: each head is hd * 4 bytes of a row.
            let head = hd * DType::F32.bytes_per_block();
            let q = ctx.view_3d(qkv, [hd, nh, n_tokens], head, row, 0)?;
            let k = ctx.view_3d(qkv, [hd, nkv, n_tokens], head, row, nh * head)?;
            let v = ctx.view_2d(qkv, hd * nkv, n_tokens, row, (nh + nkv) * head)?;
            Ok((q, k, v))
        }
    }
}
