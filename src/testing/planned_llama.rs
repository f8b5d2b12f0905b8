//! A llama model in memory of any buffer type, for planning and scheduling
//! its real graphs without loading (or even having) the weights.

use std::sync::Arc;

use gantry_engine::{BufferId, BufferType, BufferUsage, Context, DType, TensorId};

use crate::Result;
use crate::model::decoder::{
    Attention, BatchShape, DecoderGraph, DecoderHparams, DecoderWeights, KvCache, LogitsFor, build_decoder_graph,
};

/// The weights and KV cache of a llama model, placed in buffers of one
/// buffer type (virtual memory costs nothing), with the model's own graph
/// builder: what the allocator's and scheduler's tests and benches plan.
pub struct PlannedLlama {
    /// The shape.
    pub hp: DecoderHparams,
    /// The weights (matrices in the weight dtype, norms in F32).
    pub weights: DecoderWeights,
    /// The KV cache (F16).
    pub kv: KvCache,
    /// The buffers holding the weights and the cache.
    pub buffers: Vec<BufferId>,
}

impl PlannedLlama {
    /// Creates the weights (matrices in `weight_dtype`) and an F16 cache of
    /// `n_ctx` positions in `ctx`, all placed in buffers of `buft`.
    pub fn new(
        ctx: &mut Context,
        hp: DecoderHparams,
        weight_dtype: DType,
        n_ctx: usize,
        buft: &Arc<dyn BufferType>,
    ) -> Result<Self> {
        let weights = DecoderWeights::create(ctx, &hp, weight_dtype, weight_dtype)?;
        let mut buffers = ctx.alloc_tensors(&weights.all(), buft, BufferUsage::Weights)?.buffers().to_vec();
        let kv = KvCache::new(ctx, &hp, n_ctx, DType::F16, buft)?;
        buffers.extend(kv.buffers.iter().copied());
        Ok(Self { hp, weights, kv, buffers })
    }

    /// Every persistent tensor: the weights, then the cache.
    pub fn tensors(&self) -> Vec<TensorId> {
        let mut all = self.weights.all();
        all.extend(self.kv.k.iter().chain(&self.kv.v));
        all
    }

    /// The forward graph of `n_tokens` new tokens over the first `n_kv`
    /// cache rows, with logits for every token and attention computed
    /// explicitly (K·Q, masked soft max, V): llama.cpp's graph without flash
    /// attention, the shape ggml's scheduler is usually measured on.
    pub fn build(&self, ctx: &mut Context, n_tokens: usize, n_kv: usize) -> Result<DecoderGraph> {
        let shape = BatchShape { n_tokens, n_kv, logits_for: LogitsFor::All, attention: Attention::Explicit };
        build_decoder_graph(ctx, &self.hp, &self.weights, &self.kv, shape)
    }
}
