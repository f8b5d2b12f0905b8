//! A llama-shaped graph (llama.cpp's `llm_build_llama`) with SmolLM2's
//! shapes, for allocator and scheduler tests and benches.
//!
//! Per layer: RMS norm, Q/K/V projections, ROPE (NORMAL) on Q and K, K and V
//! written into an F16 KV cache with SET_ROWS, grouped-query attention over
//! the cache (KQ, softmax with a causal mask, KQV), the output projection and
//! a residual add; then RMS norm, a SwiGLU FFN and a residual add. The
//! output is RMS-normed and projected with the token embedding (tied
//! output) into logits.
//!
//! Differences from llama.cpp: the attention reads the cache through views
//! of the SET_ROWS results (so the write is a dependency in the graph rather
//! than an extra graph root), V is cached untransposed (llama.cpp's
//! flash-attention layout, made contiguous and transposed for KQV as
//! llama.cpp does then), and logits are computed for every token (no
//! `inp_out_ids` selection).

use gantry_arenas::TensorId;

use crate::{Context, DType, Result, RopeMode, RopeParams};

/// The hyperparameters that decide a llama graph's shapes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlamaShape {
    /// Number of blocks.
    pub n_layer: usize,
    /// Model width.
    pub n_embd: usize,
    /// Attention (query) heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_head`).
    pub n_head_kv: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// FFN hidden width.
    pub n_ff: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// ROPE frequency base.
    pub rope_base: f32,
}

impl LlamaShape {
    /// SmolLM2-135M: 30 layers, width 576, 9 heads, 3 KV heads, head dim 64,
    /// FFN 1536, vocabulary 49152.
    pub const SMOLLM2_135M: Self = Self {
        n_layer: 30,
        n_embd: 576,
        n_head: 9,
        n_head_kv: 3,
        head_dim: 64,
        n_ff: 1536,
        n_vocab: 49152,
        rms_eps: 1e-5,
        rope_base: 100_000.0,
    };

    /// Width of the K (and V) rows of all KV heads together.
    pub fn n_embd_kv(&self) -> usize {
        self.head_dim * self.n_head_kv
    }
}

/// One block's weights.
#[derive(Debug, Clone, Copy)]
pub struct LlamaLayer {
    /// RMS norm weight before attention, `[n_embd]`.
    pub attn_norm: TensorId,
    /// `[n_embd, n_embd]`.
    pub wq: TensorId,
    /// `[n_embd, n_embd_kv]`.
    pub wk: TensorId,
    /// `[n_embd, n_embd_kv]`.
    pub wv: TensorId,
    /// `[n_embd, n_embd]`.
    pub wo: TensorId,
    /// RMS norm weight before the FFN, `[n_embd]`.
    pub ffn_norm: TensorId,
    /// `[n_embd, n_ff]`.
    pub ffn_gate: TensorId,
    /// `[n_embd, n_ff]`.
    pub ffn_up: TensorId,
    /// `[n_ff, n_embd]`.
    pub ffn_down: TensorId,
    /// K cache, F16 `[n_embd_kv, kv_size]`.
    pub k_cache: TensorId,
    /// V cache, F16 `[n_embd_kv, kv_size]`.
    pub v_cache: TensorId,
}

/// The persistent tensors of a llama model: weights (leafs, not allocated)
/// and the KV cache. Graphs are built over them with [`LlamaModel::build`].
#[derive(Debug, Clone)]
pub struct LlamaModel {
    /// The shapes.
    pub shape: LlamaShape,
    /// Cache rows per layer.
    pub kv_size: usize,
    /// Token embedding `[n_embd, n_vocab]`, also the output projection.
    pub tok_embd: TensorId,
    /// Final RMS norm weight `[n_embd]`.
    pub output_norm: TensorId,
    /// The blocks.
    pub layers: Vec<LlamaLayer>,
}

/// The per-graph tensors of one llama forward pass.
#[derive(Debug, Clone, Copy)]
pub struct LlamaGraph {
    /// Token ids, I32 `[n_tokens]` (input).
    pub tokens: TensorId,
    /// Positions, I32 `[n_tokens]` (input).
    pub positions: TensorId,
    /// Cache rows the new K and V are written to, I32 `[n_tokens]` (input).
    pub kv_rows: TensorId,
    /// Causal mask, F32 `[n_kv, n_tokens]` (input).
    pub mask: TensorId,
    /// Logits, F32 `[n_vocab, n_tokens]` (output).
    pub logits: TensorId,
}

impl LlamaModel {
    /// Creates the weights (matrices in `weight_dtype`, norms in F32) and a
    /// KV cache of `kv_size` rows per layer, named as in llama.cpp's GGUF files.
    pub fn new(ctx: &mut Context, shape: LlamaShape, weight_dtype: DType, kv_size: usize) -> Result<Self> {
        let LlamaShape { n_embd, n_ff, n_vocab, .. } = shape;
        let n_kv = shape.n_embd_kv();
        let tok_embd = named(ctx, weight_dtype, &[n_embd, n_vocab], "token_embd.weight")?;
        let output_norm = named(ctx, DType::F32, &[n_embd], "output_norm.weight")?;
        let mut layers = Vec::with_capacity(shape.n_layer);
        for il in 0..shape.n_layer {
            let w =
                |ctx: &mut Context, dtype, ne: &[usize], what: &str| named(ctx, dtype, ne, &format!("blk.{il}.{what}"));
            layers.push(LlamaLayer {
                attn_norm: w(ctx, DType::F32, &[n_embd], "attn_norm.weight")?,
                wq: w(ctx, weight_dtype, &[n_embd, n_embd], "attn_q.weight")?,
                wk: w(ctx, weight_dtype, &[n_embd, n_kv], "attn_k.weight")?,
                wv: w(ctx, weight_dtype, &[n_embd, n_kv], "attn_v.weight")?,
                wo: w(ctx, weight_dtype, &[n_embd, n_embd], "attn_output.weight")?,
                ffn_norm: w(ctx, DType::F32, &[n_embd], "ffn_norm.weight")?,
                ffn_gate: w(ctx, weight_dtype, &[n_embd, n_ff], "ffn_gate.weight")?,
                ffn_up: w(ctx, weight_dtype, &[n_embd, n_ff], "ffn_up.weight")?,
                ffn_down: w(ctx, weight_dtype, &[n_ff, n_embd], "ffn_down.weight")?,
                k_cache: w(ctx, DType::F16, &[n_kv, kv_size], "cache_k")?,
                v_cache: w(ctx, DType::F16, &[n_kv, kv_size], "cache_v")?,
            });
        }
        Ok(Self { shape, kv_size, tok_embd, output_norm, layers })
    }

    /// Every persistent tensor: weights and caches.
    pub fn tensors(&self) -> Vec<TensorId> {
        let mut all = vec![self.tok_embd, self.output_norm];
        for l in &self.layers {
            all.extend([
                l.attn_norm,
                l.wq,
                l.wk,
                l.wv,
                l.wo,
                l.ffn_norm,
                l.ffn_gate,
                l.ffn_up,
                l.ffn_down,
                l.k_cache,
                l.v_cache,
            ]);
        }
        all
    }

    /// Allocates one buffer of `buffer_type` for every weight and cache and
    /// places them in it (with a virtual buffer type this costs no memory).
    pub fn place_weights(
        &self,
        ctx: &mut Context,
        buffer_type: &std::sync::Arc<dyn crate::BufferType>,
    ) -> Result<gantry_arenas::BufferId> {
        let align = buffer_type.alignment().max(1);
        let mut offsets = Vec::new();
        let mut end = 0usize;
        for t in self.tensors() {
            offsets.push((t, end));
            end += buffer_type.alloc_size(ctx.desc(t)?).next_multiple_of(align);
        }
        let buffer = ctx.alloc_buffer(buffer_type, end, crate::BufferUsage::Weights)?;
        for (t, offset) in offsets {
            ctx.place(t, buffer, offset)?;
        }
        Ok(buffer)
    }

    /// Builds the forward pass of `n_tokens` new tokens attending over the
    /// first `n_kv` cache rows (`n_tokens <= n_kv <= kv_size`).
    pub fn build(&self, ctx: &mut Context, n_tokens: usize, n_kv: usize) -> Result<LlamaGraph> {
        let s = self.shape;
        if n_tokens == 0 || n_tokens > n_kv || n_kv > self.kv_size {
            return Err(crate::Error::InvalidTensor {
                tensor: "llama graph".into(),
                reason: format!("need 0 < n_tokens ({n_tokens}) <= n_kv ({n_kv}) <= kv_size ({})", self.kv_size),
            });
        }
        let tokens = input(ctx, DType::I32, &[n_tokens], "inp_tokens")?;
        let positions = input(ctx, DType::I32, &[n_tokens], "inp_pos")?;
        let kv_rows = input(ctx, DType::I32, &[n_tokens], "inp_kv_rows")?;
        let mask = input(ctx, DType::F32, &[n_kv, n_tokens], "kq_mask")?;
        let kq_scale = 1.0 / (s.head_dim as f32).sqrt();
        let rope = RopeParams { n_ctx_orig: 8192, ..RopeParams::new(s.head_dim, RopeMode::Normal, s.rope_base) };
        let f16 = DType::F16.bytes_per_block();

        let mut inp = ctx.get_rows(self.tok_embd, tokens)?;
        ctx.set_name(inp, "inp_embd")?;
        for (il, l) in self.layers.iter().enumerate() {
            let inp_sa = inp;
            let cur = rms_norm(ctx, inp, l.attn_norm, s.rms_eps, &format!("attn_norm-{il}"))?;

            let q = ctx.mul_mat(l.wq, cur)?;
            let k = ctx.mul_mat(l.wk, cur)?;
            let v = ctx.mul_mat(l.wv, cur)?;
            let q = ctx.reshape(q, [s.head_dim, s.n_head, n_tokens])?;
            let k = ctx.reshape(k, [s.head_dim, s.n_head_kv, n_tokens])?;
            let q = ctx.rope(q, positions, None, rope)?;
            let k = ctx.rope(k, positions, None, rope)?;
            ctx.set_name(q, &format!("Qcur-{il}"))?;
            ctx.set_name(k, &format!("Kcur-{il}"))?;

            // Store the new K and V rows in the cache.
            let k_rows = ctx.reshape(k, [s.n_embd_kv(), n_tokens])?;
            let k_stored = ctx.set_rows(l.k_cache, k_rows, kv_rows)?;
            let v_stored = ctx.set_rows(l.v_cache, v, kv_rows)?;

            // Attend over the first n_kv cache rows, read after the writes.
            let row = s.n_embd_kv() * f16;
            let kc = ctx.view_4d(k_stored, [s.head_dim, s.n_head_kv, n_kv, 1], s.head_dim * f16, row, row * n_kv, 0)?;
            let vc = ctx.view_4d(v_stored, [s.head_dim, s.n_head_kv, n_kv, 1], s.head_dim * f16, row, row * n_kv, 0)?;
            let qp = ctx.permute(q, [0, 2, 1, 3])?; // [head_dim, n_tokens, n_head]
            let kp = ctx.permute(kc, [0, 2, 1, 3])?; // [head_dim, n_kv, n_head_kv]
            let vp = ctx.permute(vc, [0, 2, 1, 3])?;
            let kq = ctx.mul_mat(kp, qp)?; // [n_kv, n_tokens, n_head]
            let kq = ctx.soft_max_ext(kq, Some(mask), kq_scale, 0.0)?;
            let vt = ctx.transpose(vp)?;
            let vt = ctx.cont(vt)?; // [n_kv, head_dim, n_head_kv]
            let kqv = ctx.mul_mat(vt, kq)?; // [head_dim, n_tokens, n_head]
            let merged = ctx.permute(kqv, [0, 2, 1, 3])?; // [head_dim, n_head, n_tokens]
            let attn = ctx.cont_shape(merged, [s.head_dim * s.n_head, n_tokens])?;
            let attn = ctx.mul_mat(l.wo, attn)?;
            ctx.set_name(attn, &format!("attn_out-{il}"))?;

            let ffn_inp = ctx.add(attn, inp_sa)?;
            let cur = rms_norm(ctx, ffn_inp, l.ffn_norm, s.rms_eps, &format!("ffn_norm-{il}"))?;
            let up = ctx.mul_mat(l.ffn_up, cur)?;
            let gate = ctx.mul_mat(l.ffn_gate, cur)?;
            let act = ctx.swiglu_split(gate, up)?;
            let down = ctx.mul_mat(l.ffn_down, act)?;
            inp = ctx.add(down, ffn_inp)?;
            ctx.set_name(inp, &format!("l_out-{il}"))?;
        }
        let cur = rms_norm(ctx, inp, self.output_norm, s.rms_eps, "result_norm")?;
        let logits = ctx.mul_mat(self.tok_embd, cur)?;
        ctx.set_name(logits, "result_output")?;
        ctx.set_output(logits)?;
        Ok(LlamaGraph { tokens, positions, kv_rows, mask, logits })
    }
}

fn named(ctx: &mut Context, dtype: DType, ne: &[usize], name: &str) -> Result<TensorId> {
    let t = ctx.tensor(dtype, ne)?;
    ctx.set_name(t, name)
}

fn input(ctx: &mut Context, dtype: DType, ne: &[usize], name: &str) -> Result<TensorId> {
    let t = named(ctx, dtype, ne, name)?;
    ctx.set_input(t)?;
    Ok(t)
}

/// `rms_norm(x) * weight`, as llama.cpp's `build_norm`.
fn rms_norm(ctx: &mut Context, x: TensorId, weight: TensorId, eps: f32, name: &str) -> Result<TensorId> {
    let n = ctx.rms_norm(x, eps)?;
    let y = ctx.mul(n, weight)?;
    ctx.set_name(y, name)
}

#[cfg(test)]
mod tests {
    use gantry_arenas::GraphArena;

    use super::*;

    #[test]
    fn llama_graph_for_alloc_has_smollm2_shapes() {
        let mut ctx = Context::new();
        let model = LlamaModel::new(&mut ctx, LlamaShape::SMOLLM2_135M, DType::F32, 128).unwrap();
        let g = model.build(&mut ctx, 64, 96).unwrap();
        assert_eq!(ctx.desc(g.logits).unwrap().ne, [49152, 64, 1, 1]);
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &[g.logits]).unwrap();
        // 30 weights-and-cache sets of 11, the embedding, the output norm, 4 inputs.
        assert_eq!(graph.leafs().len(), 30 * 11 + 2 + 4);
        let set_rows = graph.nodes().iter().filter(|&&t| ctx.desc(t).unwrap().op == crate::Op::SetRows).count();
        assert_eq!(set_rows, 60, "K and V are written into the cache in every layer");
        let kq = ctx.find("attn_out-29").unwrap();
        assert_eq!(ctx.desc(kq).unwrap().ne, [576, 64, 1, 1]);
        assert!(graph.n_nodes() > 30 * 30, "{} nodes", graph.n_nodes());
        assert!(model.build(&mut ctx, 65, 64).is_err());
    }
}
