//! The llama forward graph for one batch of tokens.

use gantry_engine::{Context, DType, RopeMode, RopeParams, TensorId};

use super::{KvCache, LlamaHparams, LlamaWeights};
use crate::{Error, Result};

/// Which positions get logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogitsFor {
    /// Every token of the batch (scoring, `gantry logits`).
    All,
    /// The last token only (generation).
    Last,
}

/// How a graph computes attention (llama.cpp's `--flash-attn on|off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Attention {
    /// One FLASH_ATTN_EXT node per layer: scores never materialised.
    #[default]
    Flash,
    /// The scores as a product `K·Q`, a masked soft max, and the product
    /// with `V` (what llama.cpp runs without flash attention).
    Explicit,
}

/// The shape of one forward batch: what decides a graph's structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchShape {
    /// Tokens per batch.
    pub n_tokens: usize,
    /// Cache rows attended over (the first `n_kv` of the cache).
    pub n_kv: usize,
    /// Which positions get logits.
    pub logits_for: LogitsFor,
    /// How attention is computed.
    pub attention: Attention,
}

/// A built forward graph: its inputs, to write before each compute, and its
/// output.
#[derive(Debug, Clone, Copy)]
pub struct LlamaGraph {
    /// Token ids, I32 `[n_tokens]`.
    pub tokens: TensorId,
    /// Positions, I32 `[n_tokens]`.
    pub positions: TensorId,
    /// Cache rows the batch's keys and values go to, I32 `[n_tokens]`.
    pub kv_slots: TensorId,
    /// Attention mask, F16 `[n_kv, n_tokens]`: 0 where token `i` may see
    /// cache row `j`, -inf elsewhere.
    pub mask: TensorId,
    /// Logits, F32 `[n_vocab, n_outputs]`.
    pub logits: TensorId,
    /// The batch shape it was built for.
    pub shape: BatchShape,
}

/// Builds the forward pass of a llama model (llama.cpp's `llm_build_llama`):
/// embeddings, per layer RMS norm, Q/K/V projections, rope (NORMAL), the new
/// keys and values stored into the cache with SET_ROWS, grouped-query
/// attention over the first `n_kv` cache rows with a mask (flash or
/// explicit, [`Attention`]), output projection and residual, RMS norm,
/// SwiGLU feed-forward and residual; then the final norm and the output
/// projection.
pub fn build_llama_graph(
    ctx: &mut Context,
    hp: &LlamaHparams,
    w: &LlamaWeights,
    kv: &KvCache,
    shape: BatchShape,
) -> Result<LlamaGraph> {
    let BatchShape { n_tokens, n_kv, logits_for, attention } = shape;
    if n_tokens == 0 || n_kv == 0 || n_kv > kv.n_ctx || n_tokens > n_kv {
        return Err(Error::Model(format!(
            "a batch of {n_tokens} tokens over {n_kv} cache rows does not fit a cache of {}",
            kv.n_ctx
        )));
    }
    let (hd, nh, nkv) = (hp.head_dim, hp.n_head, hp.n_head_kv);
    let kv_width = hd * nkv;
    let input = |ctx: &mut Context, dtype: DType, shape: &[usize], name: &str| -> Result<TensorId> {
        let t = ctx.tensor(dtype, shape)?;
        ctx.set_name(t, name)?;
        ctx.set_input(t)?;
        Ok(t)
    };
    let tokens = input(ctx, DType::I32, &[n_tokens], "inp_tokens")?;
    let positions = input(ctx, DType::I32, &[n_tokens], "inp_pos")?;
    let kv_slots = input(ctx, DType::I32, &[n_tokens], "inp_kv_slots")?;
    let mask = input(ctx, DType::F16, &[n_kv, n_tokens], "kq_mask")?;
    let rope = RopeParams {
        n_ctx_orig: hp.n_ctx_train,
        freq_scale: hp.rope_freq_scale,
        ..RopeParams::new(hd, RopeMode::Normal, hp.rope_base)
    };
    let kq_scale = 1.0 / (hd as f32).sqrt();
    let cache_row = kv.dtype.row_size(kv_width).unwrap_or(0);
    let elem = kv.dtype.bytes_per_block();

    let mut x = ctx.get_rows(w.tok_embd, tokens)?;
    ctx.set_name(x, "embd")?;
    for (l, lw) in w.layers.iter().enumerate() {
        let name = |ctx: &mut Context, t: TensorId, s: &str| ctx.set_name(t, &format!("{s}-{l}"));
        let cur = ctx.rms_norm(x, hp.rms_eps)?;
        let cur = ctx.mul(cur, lw.attn_norm)?;
        name(ctx, cur, "attn_norm")?;

        let q = ctx.mul_mat(lw.wq, cur)?;
        let q = ctx.reshape(q, [hd, nh, n_tokens])?;
        let q = ctx.rope(q, positions, None, rope)?;
        name(ctx, q, "Qcur")?;
        let k = ctx.mul_mat(lw.wk, cur)?;
        let k = ctx.reshape(k, [hd, nkv, n_tokens])?;
        let k = ctx.rope(k, positions, None, rope)?;
        name(ctx, k, "Kcur")?;
        let v = ctx.mul_mat(lw.wv, cur)?;
        name(ctx, v, "Vcur")?;

        let k_rows = ctx.reshape(k, [kv_width, n_tokens])?;
        let k_stored = ctx.set_rows(kv.k[l], k_rows, kv_slots)?;
        let v_stored = ctx.set_rows(kv.v[l], v, kv_slots)?;
        // Views of the stored caches (not of the cache leafs) so the stores run first.
        let k_all = ctx.view_3d(k_stored, [hd, n_kv, nkv], cache_row, hd * elem, 0)?;
        let v_all = ctx.view_3d(v_stored, [hd, n_kv, nkv], cache_row, hd * elem, 0)?;
        let qp = ctx.permute(q, [0, 2, 1, 3])?;
        let attn = match attention {
            Attention::Flash => {
                let attn = ctx.flash_attn_ext(qp, k_all, v_all, Some(mask), kq_scale, 0.0, 0.0)?;
                ctx.reshape(attn, [hd * nh, n_tokens])?
            }
            Attention::Explicit => {
                // [n_kv, n_tokens, n_head]: each KV head's keys serve n_head / n_head_kv query heads.
                let kq = ctx.mul_mat(k_all, qp)?;
                let kq = ctx.soft_max_ext(kq, Some(mask), kq_scale, 0.0)?;
                name(ctx, kq, "kq_soft_max")?;
                // V with the cache rows as its columns, [n_kv, hd, n_head_kv].
                let vt = ctx.transpose(v_all)?;
                let vt = ctx.cont(vt)?;
                let kqv = ctx.mul_mat(vt, kq)?; // [hd, n_tokens, n_head]
                let merged = ctx.permute(kqv, [0, 2, 1, 3])?; // [hd, n_head, n_tokens]
                ctx.cont_shape(merged, [hd * nh, n_tokens])?
            }
        };
        name(ctx, attn, "kqv_out")?;
        let attn = ctx.mul_mat(lw.wo, attn)?;
        name(ctx, attn, "attn_out")?;
        let ffn_inp = ctx.add(x, attn)?;
        name(ctx, ffn_inp, "ffn_inp")?;

        let cur = ctx.rms_norm(ffn_inp, hp.rms_eps)?;
        let cur = ctx.mul(cur, lw.ffn_norm)?;
        name(ctx, cur, "ffn_norm")?;
        let gate = ctx.mul_mat(lw.w_gate, cur)?;
        let up = ctx.mul_mat(lw.w_up, cur)?;
        let act = ctx.swiglu_split(gate, up)?;
        name(ctx, act, "ffn_swiglu")?;
        let down = ctx.mul_mat(lw.w_down, act)?;
        name(ctx, down, "ffn_out")?;
        x = ctx.add(ffn_inp, down)?;
        name(ctx, x, "l_out")?;
    }
    if logits_for == LogitsFor::Last && n_tokens > 1 {
        let row = ctx.desc(x)?.nb[1];
        x = ctx.view_2d(x, hp.n_embd, 1, row, (n_tokens - 1) * row)?;
    }
    let cur = ctx.rms_norm(x, hp.rms_eps)?;
    let cur = ctx.mul(cur, w.output_norm)?;
    ctx.set_name(cur, "result_norm")?;
    let logits = ctx.mul_mat(w.output, cur)?;
    ctx.set_name(logits, "result_output")?;
    ctx.set_output(logits)?;
    Ok(LlamaGraph { tokens, positions, kv_slots, mask, logits, shape })
}

/// Fills a batch's inputs: token ids, positions `n_past..`, cache slots
/// (the same as the positions: one sequence), and the causal mask over the
/// first `n_kv` cache rows.
pub fn batch_inputs(tokens: &[u32], n_past: usize, n_kv: usize, mask_out: &mut Vec<half::f16>) -> (Vec<i32>, Vec<i32>) {
    let ids = tokens.iter().map(|&t| t as i32).collect();
    let pos: Vec<i32> = (0..tokens.len()).map(|i| (n_past + i) as i32).collect();
    mask_out.clear();
    for i in 0..tokens.len() {
        for j in 0..n_kv {
            let visible = j <= n_past + i;
            mask_out.push(if visible { half::f16::ZERO } else { half::f16::NEG_INFINITY });
        }
    }
    (ids, pos)
}
