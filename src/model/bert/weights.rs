//! The tensors of a BERT checkpoint, by role, found by their Hugging Face
//! names (`embeddings.word_embeddings.weight`, `encoder.layer.N.…`; a
//! `bert.` prefix is accepted).

use std::collections::HashMap;
use std::sync::Arc;

use gantry_engine::{BufferId, BufferType, BufferUsage, Context, DType, TensorId};

use super::BertConfig;
use crate::model::blocks::{FeedForward, FeedForwardKind, Norm, NormKind};
use crate::model::decoder::{WeightRole, check_dtype, check_shape};
use crate::model::unused_tensors::unused_shown;
use crate::{Error, Result};

/// One encoder block's weights (projections `[in, out]`, ggml order).
#[derive(Debug, Clone, Copy)]
pub struct BertLayerWeights {
    /// Query projection and bias.
    pub q: (TensorId, TensorId),
    /// Key projection and bias.
    pub k: (TensorId, TensorId),
    /// Value projection and bias.
    pub v: (TensorId, TensorId),
    /// Attention output projection and bias.
    pub attn_out: (TensorId, TensorId),
    /// LayerNorm after the attention residual.
    pub attn_norm: Norm,
    /// The feed-forward network (up = `intermediate.dense`, down = `output.dense`).
    pub ffn: FeedForward,
    /// LayerNorm after the feed-forward residual.
    pub ffn_norm: Norm,
}

/// Every weight of a BERT encoder.
#[derive(Debug, Clone)]
pub struct BertWeights {
    /// Word embeddings `[hidden, vocab]`.
    pub word_embeddings: TensorId,
    /// Position embeddings `[hidden, max_positions]`.
    pub position_embeddings: TensorId,
    /// Token-type embeddings `[hidden, type_vocab]`.
    pub token_type_embeddings: TensorId,
    /// LayerNorm of the summed embeddings.
    pub embeddings_norm: Norm,
    /// The blocks.
    pub layers: Vec<BertLayerWeights>,
    /// F32 copies of vectors the file stores in F16 or BF16 (element-wise
    /// ops add F32 biases): their buffer, freed with the model.
    pub converted: Option<BufferId>,
}

impl BertWeights {
    /// Finds the weights among `names` (the tensors loaded from `file`) and
    /// checks each shape against `cfg` and each dtype against its role;
    /// errors name the file and the tensor (a needed tensor among
    /// `unloadable`, name to file dtype, is reported with its type). Vectors
    /// stored in F16 or BF16 get F32 copies in a buffer of `buft`.
    pub fn from_names(
        ctx: &mut Context,
        file: &str,
        names: &HashMap<String, TensorId>,
        unloadable: &HashMap<String, String>,
        cfg: &BertConfig,
        buft: &Arc<dyn BufferType>,
    ) -> Result<Self> {
        let prefix = if names.contains_key("bert.embeddings.word_embeddings.weight") { "bert." } else { "" };
        let (h, ff) = (cfg.hidden_size, cfg.intermediate_size);
        let used = std::cell::RefCell::new(hashbrown::HashSet::new());
        let get = |ctx: &Context, name: &str, shape: &[usize]| -> Result<TensorId> {
            let full = format!("{prefix}{name}");
            used.borrow_mut().insert(full.clone());
            let t = *names.get(&full).ok_or_else(|| Error::InvalidModel {
                file: file.to_owned(),
                reason: match unloadable.get(&full) {
                    Some(dtype) => format!("tensor '{full}' has type {dtype}, expected a float type"),
                    None => format!("tensor '{full}' is missing (a BERT encoder needs it)"),
                },
            })?;
            check_shape(ctx, file, t, &full, shape)?;
            // Vectors may be any float here: they are converted to F32 below.
            check_dtype(ctx, file, t, &full, WeightRole::Matrix)?;
            Ok(t)
        };
        let mut vectors = Vec::new();
        let mut vector = |ctx: &Context, name: &str, n: usize| -> Result<TensorId> {
            let t = get(ctx, name, &[n])?;
            vectors.push(t);
            Ok(t)
        };
        let layer_norm =
            |weight, bias| Norm { kind: NormKind::Layer, weight, bias: Some(bias), eps: cfg.layer_norm_eps };
        let word_embeddings = get(ctx, "embeddings.word_embeddings.weight", &[h, cfg.vocab_size])?;
        let position_embeddings = get(ctx, "embeddings.position_embeddings.weight", &[h, cfg.max_position_embeddings])?;
        let token_type_embeddings = get(ctx, "embeddings.token_type_embeddings.weight", &[h, cfg.type_vocab_size])?;
        let embeddings_norm =
            layer_norm(vector(ctx, "embeddings.LayerNorm.weight", h)?, vector(ctx, "embeddings.LayerNorm.bias", h)?);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}.");
            let mut proj = |ctx: &Context, name: &str, n_in: usize, n_out: usize| -> Result<(TensorId, TensorId)> {
                Ok((
                    get(ctx, &format!("{p}{name}.weight"), &[n_in, n_out])?,
                    vector(ctx, &format!("{p}{name}.bias"), n_out)?,
                ))
            };
            let q = proj(ctx, "attention.self.query", h, h)?;
            let k = proj(ctx, "attention.self.key", h, h)?;
            let v = proj(ctx, "attention.self.value", h, h)?;
            let attn_out = proj(ctx, "attention.output.dense", h, h)?;
            let up = proj(ctx, "intermediate.dense", h, ff)?;
            let down = proj(ctx, "output.dense", ff, h)?;
            let attn_norm = layer_norm(
                vector(ctx, &format!("{p}attention.output.LayerNorm.weight"), h)?,
                vector(ctx, &format!("{p}attention.output.LayerNorm.bias"), h)?,
            );
            let ffn_norm = layer_norm(
                vector(ctx, &format!("{p}output.LayerNorm.weight"), h)?,
                vector(ctx, &format!("{p}output.LayerNorm.bias"), h)?,
            );
            let ffn = FeedForward {
                kind: FeedForwardKind::Gelu,
                gate: None,
                up: up.0,
                up_bias: Some(up.1),
                down: down.0,
                down_bias: Some(down.1),
            };
            layers.push(BertLayerWeights { q, k, v, attn_out, attn_norm, ffn, ffn_norm });
        }
        check_all_used(file, names.keys().chain(unloadable.keys()), &used.borrow(), prefix, cfg)?;
        let mut w = Self {
            word_embeddings,
            position_embeddings,
            token_type_embeddings,
            embeddings_norm,
            layers,
            converted: None,
        };
        w.convert_vectors(ctx, &vectors, buft)?;
        Ok(w)
    }

    /// Replaces every non-F32 vector among `vectors` by an F32 copy.
    fn convert_vectors(&mut self, ctx: &mut Context, vectors: &[TensorId], buft: &Arc<dyn BufferType>) -> Result<()> {
        let mut map = HashMap::new();
        for &t in vectors {
            if ctx.desc(t)?.dtype != DType::F32 && !map.contains_key(&t) {
                let n = ctx.desc(t)?.nelements();
                let copy = ctx.tensor(DType::F32, [n])?;
                map.insert(t, copy);
            }
        }
        if map.is_empty() {
            return Ok(());
        }
        let copies: Vec<TensorId> = map.values().copied().collect();
        let buffers = ctx.alloc_tensors(&copies, buft, BufferUsage::Weights)?;
        self.converted = buffers.buffers().first().copied();
        for (&src, &dst) in &map {
            let values = ctx.read_f32(src)?;
            ctx.set_f32(dst, &values)?;
        }
        let m = |t: TensorId| map.get(&t).copied().unwrap_or(t);
        let norm = |n: Norm| Norm { weight: m(n.weight), bias: n.bias.map(m), ..n };
        self.embeddings_norm = norm(self.embeddings_norm);
        for l in &mut self.layers {
            l.q.1 = m(l.q.1);
            l.k.1 = m(l.k.1);
            l.v.1 = m(l.v.1);
            l.attn_out.1 = m(l.attn_out.1);
            l.attn_norm = norm(l.attn_norm);
            l.ffn_norm = norm(l.ffn_norm);
            l.ffn.up_bias = l.ffn.up_bias.map(m);
            l.ffn.down_bias = l.ffn.down_bias.map(m);
        }
        Ok(())
    }
}

/// Fails, naming the file and the tensor, when the file holds a tensor the
/// encoder has no use for (as the decoders' loaders do): a layer past
/// `num_hidden_layers` means config.json and the weights disagree, and
/// computing without it gives other embeddings with no word said. The
/// parts of a checkpoint that are not the encoder are accounted for:
/// `embeddings.position_ids` (positions, which the encoder makes itself),
/// the `pooler` (BERT's classification pooler, not sentence pooling) and
/// the pre-training heads (`cls.`, beside a `bert.` prefix).
fn check_all_used<'a>(
    file: &str,
    names: impl Iterator<Item = &'a String>,
    used: &hashbrown::HashSet<String>,
    prefix: &str,
    cfg: &BertConfig,
) -> Result<()> {
    let not_the_encoder = |name: &str| {
        let inner = name.strip_prefix(prefix).unwrap_or(name);
        inner == "embeddings.position_ids" || inner.starts_with("pooler.") || name.starts_with("cls.")
    };
    let not_used = |name: &str| used.contains(name) || not_the_encoder(name);
    match unused_shown(names.map(String::as_str), not_used) {
        None => Ok(()),
        Some(shown) => Err(Error::InvalidModel {
            file: file.to_owned(),
            reason: format!(
                "tensor {shown} has no role in a BERT encoder of {} layers (config.json and the weights disagree, \
                 or this is not a BERT checkpoint)",
                cfg.num_hidden_layers
            ),
        }),
    }
}
