//! The tensors of a llama-family model, by role.

use std::collections::HashMap;

use gantry_engine::{Context, DType, SplitMix64, TensorId};

use super::LlamaHparams;
use crate::{Error, Result};

/// One transformer block's weights.
#[derive(Debug, Clone, Copy)]
pub struct LayerWeights {
    /// RMS norm before attention, `[n_embd]`.
    pub attn_norm: TensorId,
    /// Query projection, `[n_embd, n_head * head_dim]`.
    pub wq: TensorId,
    /// Key projection, `[n_embd, n_head_kv * head_dim]`.
    pub wk: TensorId,
    /// Value projection, `[n_embd, n_head_kv * head_dim]`.
    pub wv: TensorId,
    /// Attention output projection, `[n_head * head_dim, n_embd]`.
    pub wo: TensorId,
    /// RMS norm before the feed-forward network, `[n_embd]`.
    pub ffn_norm: TensorId,
    /// Gate projection, `[n_embd, n_ff]`.
    pub w_gate: TensorId,
    /// Up projection, `[n_embd, n_ff]`.
    pub w_up: TensorId,
    /// Down projection, `[n_ff, n_embd]`.
    pub w_down: TensorId,
}

/// Every weight of a llama-family model.
#[derive(Debug, Clone)]
pub struct LlamaWeights {
    /// Token embeddings, `[n_embd, n_vocab]`.
    pub tok_embd: TensorId,
    /// Final RMS norm, `[n_embd]`.
    pub output_norm: TensorId,
    /// Output projection `[n_embd, n_vocab]`; the token embeddings when tied.
    pub output: TensorId,
    /// The blocks.
    pub layers: Vec<LayerWeights>,
}

impl LlamaWeights {
    /// Finds the weights by their GGUF names (`token_embd.weight`,
    /// `blk.N.attn_q.weight`, ...) and checks every shape against `hp`.
    /// A missing `output.weight` means the output is tied to the embeddings.
    pub fn from_names(ctx: &Context, names: &HashMap<String, TensorId>, hp: &LlamaHparams) -> Result<Self> {
        let get = |name: &str, shape: &[usize]| -> Result<TensorId> {
            let t = *names.get(name).ok_or_else(|| Error::Model(format!("weight {name} is missing")))?;
            check_shape(ctx, t, name, shape)?;
            Ok(t)
        };
        let (e, q, kv, ff) = (hp.n_embd, hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim, hp.n_ff);
        let tok_embd = get("token_embd.weight", &[e, hp.n_vocab])?;
        let output = match names.get("output.weight") {
            Some(_) => get("output.weight", &[e, hp.n_vocab])?,
            None => tok_embd,
        };
        let layers = (0..hp.n_layer)
            .map(|l| {
                let n = |s: &str| format!("blk.{l}.{s}.weight");
                Ok(LayerWeights {
                    attn_norm: get(&n("attn_norm"), &[e])?,
                    wq: get(&n("attn_q"), &[e, q])?,
                    wk: get(&n("attn_k"), &[e, kv])?,
                    wv: get(&n("attn_v"), &[e, kv])?,
                    wo: get(&n("attn_output"), &[q, e])?,
                    ffn_norm: get(&n("ffn_norm"), &[e])?,
                    w_gate: get(&n("ffn_gate"), &[e, ff])?,
                    w_up: get(&n("ffn_up"), &[e, ff])?,
                    w_down: get(&n("ffn_down"), &[ff, e])?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { tok_embd, output_norm: get("output_norm.weight", &[e])?, output, layers })
    }

    /// Creates every weight (unallocated), named as in GGUF files: matrices in
    /// `dtype`, norms in F32, embeddings in `embd_dtype` (tied output).
    pub fn create(ctx: &mut Context, hp: &LlamaHparams, dtype: DType, embd_dtype: DType) -> Result<Self> {
        hp.validate()?;
        let (e, q, kv, ff) = (hp.n_embd, hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim, hp.n_ff);
        let mut make = |name: String, dt: DType, shape: &[usize]| -> Result<TensorId> {
            let t = ctx.tensor(dt, shape)?;
            ctx.set_name(t, &name)?;
            Ok(t)
        };
        let tok_embd = make("token_embd.weight".into(), embd_dtype, &[e, hp.n_vocab])?;
        let output_norm = make("output_norm.weight".into(), DType::F32, &[e])?;
        let mut layers = Vec::with_capacity(hp.n_layer);
        for l in 0..hp.n_layer {
            let n = |s: &str| format!("blk.{l}.{s}.weight");
            layers.push(LayerWeights {
                attn_norm: make(n("attn_norm"), DType::F32, &[e])?,
                wq: make(n("attn_q"), dtype, &[e, q])?,
                wk: make(n("attn_k"), dtype, &[e, kv])?,
                wv: make(n("attn_v"), dtype, &[e, kv])?,
                wo: make(n("attn_output"), dtype, &[q, e])?,
                ffn_norm: make(n("ffn_norm"), DType::F32, &[e])?,
                w_gate: make(n("ffn_gate"), dtype, &[e, ff])?,
                w_up: make(n("ffn_up"), dtype, &[e, ff])?,
                w_down: make(n("ffn_down"), dtype, &[ff, e])?,
            });
        }
        Ok(Self { tok_embd, output_norm, output: tok_embd, layers })
    }

    /// Every weight tensor, each once.
    pub fn all(&self) -> Vec<TensorId> {
        let mut v = vec![self.tok_embd, self.output_norm];
        if self.output != self.tok_embd {
            v.push(self.output);
        }
        for l in &self.layers {
            v.extend([l.attn_norm, l.wq, l.wk, l.wv, l.wo, l.ffn_norm, l.w_gate, l.w_up, l.w_down]);
        }
        v
    }

    /// Fills every weight with seeded random values suited to a stable
    /// forward pass (uniform with variance `1 / fan_in`; norms near 1). The
    /// weights must be allocated in writable memory.
    pub fn fill_random(&self, ctx: &mut Context, seed: u64) -> Result<()> {
        let mut rng = SplitMix64::new(seed);
        for t in self.all() {
            let d = *ctx.desc(t)?;
            let n = d.nelements();
            let values: Vec<f32> = if d.n_dims() == 1 {
                (0..n).map(|_| 1.0 + 0.1 * rng.uniform()).collect()
            } else {
                let a = if t == self.tok_embd { 1.0 } else { (3.0 / d.ne[0] as f32).sqrt() };
                (0..n).map(|_| a * rng.uniform()).collect()
            };
            ctx.set_f32(t, &values)?;
        }
        Ok(())
    }
}

fn check_shape(ctx: &Context, t: TensorId, name: &str, shape: &[usize]) -> Result<()> {
    let d = ctx.desc(t)?;
    let mut want = [1usize; 4];
    want[..shape.len()].copy_from_slice(shape);
    if d.ne != want {
        return Err(Error::Model(format!("weight {name} has shape {:?}, expected {want:?}", d.ne)));
    }
    Ok(())
}
