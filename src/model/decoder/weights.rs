//! The tensors of a decoder model, by role, found by their GGUF names.

use std::collections::HashMap;

use gantry_engine::{Context, DType, SplitMix64, TensorId};

use super::DecoderHparams;
use crate::model::blocks::{Experts, FeedForward, Norm};
use crate::model::unused_tensors::unused_shown;
use crate::{Error, Result};

/// How a layer projects its input to queries, keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QkvWeights {
    /// Three matrices: queries `[n_embd, n_head * head_dim]`, keys and
    /// values `[n_embd, n_head_kv * head_dim]` (`attn_q`, `attn_k`, `attn_v`).
    Separate {
        /// Query projection.
        wq: TensorId,
        /// Key projection.
        wk: TensorId,
        /// Value projection.
        wv: TensorId,
    },
    /// One matrix `[n_embd, (n_head + 2 n_head_kv) * head_dim]` whose
    /// output rows are the queries, the keys and the values in that order
    /// (`attn_qkv`, Phi 3).
    Fused(TensorId),
}

impl QkvWeights {
    /// The matrices, each once.
    pub fn tensors(&self) -> impl Iterator<Item = TensorId> + '_ {
        let (a, b) = match *self {
            Self::Separate { wq, wk, wv } => ([Some(wq), Some(wk)], Some(wv)),
            Self::Fused(w) => ([Some(w), None], None),
        };
        a.into_iter().chain([b]).flatten()
    }

    /// The same roles over other tensors.
    pub fn map(&self, f: impl Fn(TensorId) -> TensorId) -> Self {
        match *self {
            Self::Separate { wq, wk, wv } => Self::Separate { wq: f(wq), wk: f(wk), wv: f(wv) },
            Self::Fused(w) => Self::Fused(f(w)),
        }
    }
}

/// A layer's feed-forward network: dense, or a mixture of experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FfnWeights {
    /// One network for every token.
    Dense {
        /// Gate projection, `[n_embd, n_ff]`; `None` when it is stacked
        /// into `up` (`fused_gate_up`).
        gate: Option<TensorId>,
        /// Up projection, `[n_embd, n_ff]`, or `[n_embd, 2 n_ff]` with the
        /// gate's rows first when the gate is stacked into it (Phi 3).
        up: TensorId,
        /// Down projection, `[n_ff, n_embd]`.
        down: TensorId,
    },
    /// A router and `n_expert` networks (`ffn_gate_inp`, `ffn_*_exps`).
    Experts(Experts),
}

impl FfnWeights {
    /// The matrices and biases, each once.
    pub fn tensors(&self) -> Vec<TensorId> {
        match self {
            Self::Dense { gate, up, down } => [*gate, Some(*up), Some(*down)].into_iter().flatten().collect(),
            Self::Experts(e) => e.tensors().collect(),
        }
    }

    /// The same roles over other tensors.
    pub fn map(&self, f: impl Fn(TensorId) -> TensorId) -> Self {
        match self {
            Self::Dense { gate, up, down } => Self::Dense { gate: gate.map(&f), up: f(*up), down: f(*down) },
            Self::Experts(e) => Self::Experts(e.map(f)),
        }
    }
}

/// One transformer block's weights.
#[derive(Debug, Clone, Copy)]
pub struct LayerWeights {
    /// Norm before attention, `[n_embd]`.
    pub attn_norm: TensorId,
    /// Query, key and value projections.
    pub qkv: QkvWeights,
    /// Attention output projection, `[n_head * head_dim, n_embd]`.
    pub wo: TensorId,
    /// Query bias, `[n_head * head_dim]` (`qkv_bias`).
    pub bq: Option<TensorId>,
    /// Key bias, `[n_head_kv * head_dim]` (`qkv_bias`).
    pub bk: Option<TensorId>,
    /// Value bias, `[n_head_kv * head_dim]` (`qkv_bias`).
    pub bv: Option<TensorId>,
    /// Attention output bias, `[n_embd]` (`attn_out_bias`).
    pub bo: Option<TensorId>,
    /// Attention sinks, F32 `[n_head]` (`attn_sinks`).
    pub attn_sinks: Option<TensorId>,
    /// Norm of each query head, `[head_dim]` (`qk_norm`).
    pub attn_q_norm: Option<TensorId>,
    /// Norm of each key head, `[head_dim]` (`qk_norm`).
    pub attn_k_norm: Option<TensorId>,
    /// Norm after attention, `[n_embd]` (`post_norms`).
    pub attn_post_norm: Option<TensorId>,
    /// Norm before the feed-forward network, `[n_embd]`.
    pub ffn_norm: TensorId,
    /// The feed-forward network.
    pub ffn: FfnWeights,
    /// Norm after the feed-forward network, `[n_embd]` (`post_norms`).
    pub ffn_post_norm: Option<TensorId>,
}

impl LayerWeights {
    /// Every tensor of the layer, each once.
    pub fn tensors(&self) -> impl Iterator<Item = TensorId> + '_ {
        [self.attn_norm, self.wo, self.ffn_norm].into_iter().chain(self.qkv.tensors()).chain(self.ffn.tensors()).chain(
            [
                self.bq,
                self.bk,
                self.bv,
                self.bo,
                self.attn_sinks,
                self.attn_q_norm,
                self.attn_k_norm,
                self.attn_post_norm,
                self.ffn_post_norm,
            ]
            .into_iter()
            .flatten(),
        )
    }

    /// The dense feed-forward network as a shared block (`None` when the
    /// layer has experts).
    pub fn feed_forward(&self, hp: &DecoderHparams) -> Option<FeedForward> {
        match self.ffn {
            FfnWeights::Dense { gate, up, down } => {
                Some(FeedForward { kind: hp.ffn, gate, up, up_bias: None, down, down_bias: None })
            }
            FfnWeights::Experts(_) => None,
        }
    }
}

/// A norm of the decoder's kind over `weight`.
pub fn decoder_norm(hp: &DecoderHparams, weight: TensorId) -> Norm {
    Norm { kind: hp.norm, weight, bias: None, eps: hp.rms_eps }
}

/// Every weight of a decoder model.
#[derive(Debug, Clone)]
pub struct DecoderWeights {
    /// Token embeddings, `[n_embd, n_vocab]`.
    pub tok_embd: TensorId,
    /// Final norm, `[n_embd]`.
    pub output_norm: TensorId,
    /// Output projection `[n_embd, n_vocab]`; the token embeddings when tied.
    pub output: TensorId,
    /// Rope frequency factors, F32 `[head_dim / 2]` (`rope_factors`).
    pub rope_freqs: Option<TensorId>,
    /// The blocks.
    pub layers: Vec<LayerWeights>,
}

impl DecoderWeights {
    /// Finds the weights by their GGUF names (`token_embd.weight`,
    /// `blk.N.attn_q.weight`, ...) in the tensors of `file` and checks every
    /// shape against `hp`; the optional tensors (norms, biases, rope
    /// factors) are required exactly when `hp` says the model has them. A
    /// missing `output.weight` means the output is tied to the embeddings.
    ///
    /// Every tensor of the file must have a role: one the model would not
    /// use (an `attn_output.bias`, a tensor of another family, a layer past
    /// `block_count`) is an error naming it, never silently left out of the
    /// computation. Errors name the file and the tensor.
    pub fn from_names(
        ctx: &Context,
        file: &str,
        names: &HashMap<String, TensorId>,
        hp: &DecoderHparams,
    ) -> Result<Self> {
        refuse_per_expert_tensors(file, names)?;
        let used = std::cell::RefCell::new(hashbrown::HashSet::with_capacity(names.len()));
        let get = |name: &str, shape: &[usize]| -> Result<TensorId> {
            used.borrow_mut().insert(name.to_owned());
            let t = *names.get(name).ok_or_else(|| Error::InvalidModel {
                file: file.to_owned(),
                reason: format!("tensor '{name}' is missing ({} needs it)", hp.arch),
            })?;
            check_shape(ctx, file, t, name, shape)?;
            // Norms multiply F32 activations element-wise; matrices may be any float or quantized type.
            // Biases (per expert, `[n, n_expert]`, included) are added element-wise too.
            let role =
                if shape.len() == 1 || name.ends_with(".bias") { WeightRole::Vector } else { WeightRole::Matrix };
            check_dtype(ctx, file, t, name, role)?;
            Ok(t)
        };
        let (e, q, kv, ff) = (hp.n_embd, hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim, hp.n_ff);
        let tok_embd = get("token_embd.weight", &[e, hp.n_vocab])?;
        let output = match names.get("output.weight") {
            Some(_) => get("output.weight", &[e, hp.n_vocab])?,
            None => tok_embd,
        };
        let rope_freqs = hp.rope_factors.then(|| get("rope_freqs.weight", &[hp.head_dim / 2])).transpose()?;
        let layers = (0..hp.n_layer)
            .map(|l| {
                let n = |s: &str| format!("blk.{l}.{s}.weight");
                let opt = |present: bool, s: &str, shape: &[usize]| present.then(|| get(&n(s), shape)).transpose();
                let bias_if = |present: bool, s: &str, shape: &[usize]| {
                    present.then(|| get(&format!("blk.{l}.{s}.bias"), shape)).transpose()
                };
                let bias = |s: &str, width: usize| bias_if(hp.qkv_bias, s, &[width]);
                Ok(LayerWeights {
                    attn_norm: get(&n("attn_norm"), &[e])?,
                    qkv: if hp.fused_qkv {
                        QkvWeights::Fused(get(&n("attn_qkv"), &[e, q + 2 * kv])?)
                    } else {
                        QkvWeights::Separate {
                            wq: get(&n("attn_q"), &[e, q])?,
                            wk: get(&n("attn_k"), &[e, kv])?,
                            wv: get(&n("attn_v"), &[e, kv])?,
                        }
                    },
                    wo: get(&n("attn_output"), &[q, e])?,
                    bq: bias("attn_q", q)?,
                    bk: bias("attn_k", kv)?,
                    bv: bias("attn_v", kv)?,
                    bo: bias_if(hp.attn_out_bias, "attn_output", &[e])?,
                    attn_sinks: opt(hp.attn_sinks, "attn_sinks", &[hp.n_head])?,
                    attn_q_norm: opt(hp.qk_norm, "attn_q_norm", &[hp.head_dim])?,
                    attn_k_norm: opt(hp.qk_norm, "attn_k_norm", &[hp.head_dim])?,
                    attn_post_norm: opt(hp.post_norms, "post_attention_norm", &[e])?,
                    ffn_norm: get(&n(hp.ffn_norm_name), &[e])?,
                    ffn: if hp.n_expert > 0 {
                        let (n_exp, ff_exp, b) = (hp.n_expert, hp.n_ff_exp, hp.expert_biases);
                        FfnWeights::Experts(Experts {
                            router: get(&n("ffn_gate_inp"), &[e, n_exp])?,
                            router_bias: bias_if(b, "ffn_gate_inp", &[n_exp])?,
                            gate: get(&n("ffn_gate_exps"), &[e, ff_exp, n_exp])?,
                            gate_bias: bias_if(b, "ffn_gate_exps", &[ff_exp, n_exp])?,
                            up: get(&n("ffn_up_exps"), &[e, ff_exp, n_exp])?,
                            up_bias: bias_if(b, "ffn_up_exps", &[ff_exp, n_exp])?,
                            down: get(&n("ffn_down_exps"), &[ff_exp, e, n_exp])?,
                            down_bias: bias_if(b, "ffn_down_exps", &[e, n_exp])?,
                        })
                    } else {
                        FfnWeights::Dense {
                            gate: opt(!hp.fused_gate_up, "ffn_gate", &[e, ff])?,
                            up: get(&n("ffn_up"), &[e, if hp.fused_gate_up { 2 * ff } else { ff }])?,
                            down: get(&n("ffn_down"), &[ff, e])?,
                        }
                    },
                    ffn_post_norm: opt(hp.post_norms, "post_ffw_norm", &[e])?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let output_norm = get("output_norm.weight", &[e])?;
        let used = used.into_inner();
        if let Some(shown) = unused_shown(names.keys().map(String::as_str), |n| used.contains(n)) {
            return Err(Error::InvalidModel {
                file: file.to_owned(),
                reason: format!(
                    "tensor {shown} has no role in a {} model as Gantry builds it; refusing to load rather than \
                     compute without it",
                    hp.arch
                ),
            });
        }
        Ok(Self { tok_embd, output_norm, output, rope_freqs, layers })
    }

    /// Creates every weight (unallocated), named as in GGUF files: matrices in
    /// `dtype`, norms in F32, embeddings in `embd_dtype` (tied output).
    pub fn create(ctx: &mut Context, hp: &DecoderHparams, dtype: DType, embd_dtype: DType) -> Result<Self> {
        hp.validate()?;
        let (e, q, kv, ff) = (hp.n_embd, hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim, hp.n_ff);
        let mut make = |name: String, dt: DType, shape: &[usize]| -> Result<TensorId> {
            let t = ctx.tensor(dt, shape)?;
            ctx.set_name(t, &name)?;
            Ok(t)
        };
        let tok_embd = make("token_embd.weight".into(), embd_dtype, &[e, hp.n_vocab])?;
        let output_norm = make("output_norm.weight".into(), DType::F32, &[e])?;
        let rope_freqs =
            hp.rope_factors.then(|| make("rope_freqs.weight".into(), DType::F32, &[hp.head_dim / 2])).transpose()?;
        let mut layers = Vec::with_capacity(hp.n_layer);
        for l in 0..hp.n_layer {
            let n = |s: &str| format!("blk.{l}.{s}.weight");
            let mut bias = |present: bool, s: &str, shape: &[usize]| -> Result<Option<TensorId>> {
                present.then(|| make(format!("blk.{l}.{s}.bias"), DType::F32, shape)).transpose()
            };
            let (bq, bk, bv) = (
                bias(hp.qkv_bias, "attn_q", &[q])?,
                bias(hp.qkv_bias, "attn_k", &[kv])?,
                bias(hp.qkv_bias, "attn_v", &[kv])?,
            );
            let bo = bias(hp.attn_out_bias, "attn_output", &[e])?;
            let (n_exp, ff_exp, b) = (hp.n_expert, hp.n_ff_exp, hp.expert_biases && hp.n_expert > 0);
            let router_bias = bias(b, "ffn_gate_inp", &[n_exp])?;
            let gate_bias = bias(b, "ffn_gate_exps", &[ff_exp, n_exp])?;
            let up_bias = bias(b, "ffn_up_exps", &[ff_exp, n_exp])?;
            let down_bias = bias(b, "ffn_down_exps", &[e, n_exp])?;
            let mut opt = |present: bool, s: &str, width: usize| -> Result<Option<TensorId>> {
                present.then(|| make(n(s), DType::F32, &[width])).transpose()
            };
            let attn_sinks = opt(hp.attn_sinks, "attn_sinks", hp.n_head)?;
            let attn_q_norm = opt(hp.qk_norm, "attn_q_norm", hp.head_dim)?;
            let attn_k_norm = opt(hp.qk_norm, "attn_k_norm", hp.head_dim)?;
            let attn_post_norm = opt(hp.post_norms, "post_attention_norm", e)?;
            let ffn_post_norm = opt(hp.post_norms, "post_ffw_norm", e)?;
            layers.push(LayerWeights {
                attn_norm: make(n("attn_norm"), DType::F32, &[e])?,
                qkv: QkvWeights::Separate {
                    wq: make(n("attn_q"), dtype, &[e, q])?,
                    wk: make(n("attn_k"), dtype, &[e, kv])?,
                    wv: make(n("attn_v"), dtype, &[e, kv])?,
                },
                wo: make(n("attn_output"), dtype, &[q, e])?,
                bq,
                bk,
                bv,
                bo,
                attn_sinks,
                attn_q_norm,
                attn_k_norm,
                attn_post_norm,
                ffn_norm: make(n(hp.ffn_norm_name), DType::F32, &[e])?,
                ffn: if hp.n_expert > 0 {
                    FfnWeights::Experts(Experts {
                        router: make(n("ffn_gate_inp"), dtype, &[e, n_exp])?,
                        router_bias,
                        gate: make(n("ffn_gate_exps"), dtype, &[e, ff_exp, n_exp])?,
                        gate_bias,
                        up: make(n("ffn_up_exps"), dtype, &[e, ff_exp, n_exp])?,
                        up_bias,
                        down: make(n("ffn_down_exps"), dtype, &[ff_exp, e, n_exp])?,
                        down_bias,
                    })
                } else {
                    FfnWeights::Dense {
                        gate: Some(make(n("ffn_gate"), dtype, &[e, ff])?),
                        up: make(n("ffn_up"), dtype, &[e, ff])?,
                        down: make(n("ffn_down"), dtype, &[ff, e])?,
                    }
                },
                ffn_post_norm,
            });
        }
        Ok(Self { tok_embd, output_norm, output: tok_embd, rope_freqs, layers })
    }

    /// Every weight tensor, each once.
    pub fn all(&self) -> Vec<TensorId> {
        let mut v = vec![self.tok_embd, self.output_norm];
        if self.output != self.tok_embd {
            v.push(self.output);
        }
        v.extend(self.rope_freqs);
        for l in &self.layers {
            v.extend(l.tensors());
        }
        v
    }

    /// The same roles over other tensors: `f` maps each weight to its replacement
    /// (a copy in another backend's memory, say).
    pub fn map(&self, f: impl Fn(TensorId) -> TensorId) -> Self {
        let layers = self
            .layers
            .iter()
            .map(|l| LayerWeights {
                attn_norm: f(l.attn_norm),
                qkv: l.qkv.map(&f),
                wo: f(l.wo),
                bq: l.bq.map(&f),
                bk: l.bk.map(&f),
                bv: l.bv.map(&f),
                bo: l.bo.map(&f),
                attn_sinks: l.attn_sinks.map(&f),
                attn_q_norm: l.attn_q_norm.map(&f),
                attn_k_norm: l.attn_k_norm.map(&f),
                attn_post_norm: l.attn_post_norm.map(&f),
                ffn_norm: f(l.ffn_norm),
                ffn: l.ffn.map(&f),
                ffn_post_norm: l.ffn_post_norm.map(&f),
            })
            .collect();
        Self {
            tok_embd: f(self.tok_embd),
            output_norm: f(self.output_norm),
            output: f(self.output),
            rope_freqs: self.rope_freqs.map(&f),
            layers,
        }
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

/// An error naming the first tensor of the old Mixtral layout, one matrix
/// per expert (`blk.N.ffn_gate.E.weight`, `ffn_up.E`, `ffn_down.E`), which
/// llama.cpp's converter stopped writing: its experts are one
/// `ffn_*_exps` tensor per layer now, and that is what Gantry reads.
fn refuse_per_expert_tensors(file: &str, names: &HashMap<String, TensorId>) -> Result<()> {
    let per_expert = |name: &str| {
        let Some(rest) = name.strip_prefix("blk.") else { return false };
        let mut parts = rest.split('.');
        let (layer, role, expert, kind) = (parts.next(), parts.next(), parts.next(), parts.next());
        let is_number = |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
        is_number(layer)
            && matches!(role, Some("ffn_gate" | "ffn_up" | "ffn_down"))
            && is_number(expert)
            && kind == Some("weight")
            && parts.next().is_none()
    };
    let mut found: Vec<&str> = names.keys().map(String::as_str).filter(|n| per_expert(n)).collect();
    found.sort_unstable();
    match found.first() {
        Some(name) => Err(Error::InvalidModel {
            file: file.to_owned(),
            reason: format!(
                "tensor '{name}' is one expert's matrix of the old Mixtral layout ({} such tensors); Gantry reads the \
                 experts stacked in one ffn_{{gate,up,down}}_exps tensor per layer: convert the model again with a \
                 current llama.cpp",
                found.len()
            ),
        }),
        None => Ok(()),
    }
}

/// An error naming `file` and `name` unless `t` has exactly `shape`.
pub(crate) fn check_shape(ctx: &Context, file: &str, t: TensorId, name: &str, shape: &[usize]) -> Result<()> {
    let d = ctx.desc(t)?;
    let mut want = [1usize; 4];
    want[..shape.len()].copy_from_slice(shape);
    if d.ne != want {
        return Err(Error::InvalidModel {
            file: file.to_owned(),
            reason: format!("tensor '{name}' has shape {:?}, the hyperparameters say {want:?}", d.ne),
        });
    }
    Ok(())
}

/// What a weight is used as, which decides the dtypes it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WeightRole {
    /// A norm's scale or a bias, added or multiplied element-wise: F32.
    Vector,
    /// A projection or embedding table: a float or block-quantized type.
    Matrix,
}

/// An error naming `file` and `name` unless `t`'s dtype suits `role`.
pub(crate) fn check_dtype(ctx: &Context, file: &str, t: TensorId, name: &str, role: WeightRole) -> Result<()> {
    let dtype = ctx.desc(t)?.dtype;
    let ok = match role {
        WeightRole::Vector => dtype == DType::F32,
        WeightRole::Matrix => dtype.is_float() || dtype.is_quantized(),
    };
    if !ok {
        let want = match role {
            WeightRole::Vector => "F32",
            WeightRole::Matrix => "a float or quantized type",
        };
        return Err(Error::InvalidModel {
            file: file.to_owned(),
            reason: format!("tensor '{name}' has type {dtype}, expected {want}"),
        });
    }
    Ok(())
}
