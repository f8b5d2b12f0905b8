//! Running a llama model: batches through the scheduler, the KV cache, logits.

use std::sync::Arc;

use gantry_arenas::GraphArena;
use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::{Backend, BufferType, Context, DType, Mark};
use half::f16;

use super::{
    Attention, BatchShape, KvCache, LlamaGraph, LlamaHparams, LlamaWeights, LogitsFor, batch_inputs, build_llama_graph,
};
use crate::{Error, Result};

/// Cache rows are attended over in buckets of this many, so the decode graph
/// changes once every `KV_BUCKET` tokens instead of every token.
pub const KV_BUCKET: usize = 256;

/// A model ready to run: weights, a KV cache, a scheduler over the backends,
/// and the current graph, rebuilt only when the batch shape changes.
///
/// The context is the caller's (it also holds the weights); the session adds
/// its graph tensors after a mark and removes them when it rebuilds.
pub struct Session {
    hp: LlamaHparams,
    weights: LlamaWeights,
    kv: KvCache,
    sched: Scheduler,
    arena: GraphArena,
    graph: Option<LlamaGraph>,
    mark: Mark,
    attention: Attention,
    n_past: usize,
    mask: Vec<f16>,
    logits: Vec<f32>,
}

/// Options of a [`Session`].
#[derive(Debug, Clone, Copy)]
pub struct SessionParams {
    /// Positions the KV cache holds.
    pub n_ctx: usize,
    /// KV cache element type.
    pub kv_dtype: DType,
    /// Pipeline copies for the scheduler (1 = off).
    pub n_copies: usize,
    /// How attention is computed.
    pub attention: Attention,
}

impl Default for SessionParams {
    fn default() -> Self {
        Self { n_ctx: 2048, kv_dtype: DType::F16, n_copies: 1, attention: Attention::Flash }
    }
}

/// Where each layer's cache goes: with its weights when the layers' weights
/// are on different backends (llama.cpp's rule, so attention reads its cache
/// where it runs), else all in the first backend's memory.
fn kv_buffer_types(ctx: &Context, weights: &LlamaWeights, backends: &[Arc<dyn Backend>]) -> Vec<Arc<dyn BufferType>> {
    let first = backends[0].device().buffer_type();
    let owner: Vec<Option<usize>> = weights
        .layers
        .iter()
        .map(|l| {
            let (entry, _) = ctx.tensor_buffer(l.wq).ok()?;
            backends.iter().position(|b| b.device().supports_buft(entry.buffer_type.as_ref()))
        })
        .collect();
    let spread = owner.iter().all(Option::is_some) && owner.windows(2).any(|w| w[0] != w[1]);
    owner
        .iter()
        .map(|o| match o {
            Some(b) if spread => backends[*b].device().buffer_type(),
            _ => first.clone(),
        })
        .collect()
}

impl Session {
    /// A session over `backends` (priority order, CPU last). The KV cache goes
    /// to the first backend's memory, or, when the layers' weights are spread
    /// over several backends, each layer's cache to its weights' backend.
    pub fn new(
        ctx: &mut Context,
        hp: LlamaHparams,
        weights: LlamaWeights,
        backends: &[Arc<dyn Backend>],
        params: SessionParams,
    ) -> Result<Self> {
        hp.validate()?;
        if backends.is_empty() {
            return Err(Error::Model("no backends given".into()));
        }
        let n_ctx = params.n_ctx.min(hp.n_ctx_train.max(1)).max(1);
        let bufts = kv_buffer_types(ctx, &weights, backends);
        let kv = KvCache::new_per_layer(ctx, &hp, n_ctx, params.kv_dtype, &bufts)?;
        let sched_params = SchedulerParams { n_copies: params.n_copies, ..SchedulerParams::default() };
        let sched = Scheduler::new(backends, sched_params)?;
        let mark = ctx.mark();
        Ok(Self {
            hp,
            weights,
            kv,
            sched,
            arena: GraphArena::new(),
            graph: None,
            mark,
            attention: params.attention,
            n_past: 0,
            mask: Vec::new(),
            logits: Vec::new(),
        })
    }

    /// The hyperparameters.
    pub fn hparams(&self) -> &LlamaHparams {
        &self.hp
    }

    /// Positions already in the KV cache.
    pub fn n_past(&self) -> usize {
        self.n_past
    }

    /// Positions the KV cache holds.
    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx
    }

    /// The scheduler (placement, splits, buffer sizes).
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    /// Bytes of the KV cache.
    pub fn kv_bytes(&self, ctx: &Context) -> usize {
        self.kv.size_bytes(ctx)
    }

    /// Forgets every position (a new conversation).
    pub fn clear(&mut self, ctx: &Context) -> Result<()> {
        self.n_past = 0;
        self.kv.clear(ctx)
    }

    /// Sizes the scheduler's memory for a batch of `n_tokens` over the whole
    /// context (the largest graph), so later batches never re-allocate.
    pub fn reserve(&mut self, ctx: &mut Context, n_tokens: usize) -> Result<Vec<usize>> {
        let g = self.graph_for(ctx, n_tokens, self.kv.n_ctx, LogitsFor::All)?;
        self.arena.reset();
        let graph = ctx.build_graph(&self.arena, &[g.logits])?;
        Ok(self.sched.reserve(ctx, graph)?)
    }

    /// The graph for this batch shape: the current one, or a new build.
    fn graph_for(
        &mut self,
        ctx: &mut Context,
        n_tokens: usize,
        n_kv: usize,
        logits_for: LogitsFor,
    ) -> Result<LlamaGraph> {
        let shape = BatchShape { n_tokens, n_kv, logits_for, attention: self.attention };
        if let Some(g) = self.graph
            && g.shape == shape
        {
            return Ok(g);
        }
        self.sched.reset(ctx);
        ctx.rewind(self.mark);
        self.graph = None;
        let g = build_llama_graph(ctx, &self.hp, &self.weights, &self.kv, shape)?;
        self.graph = Some(g);
        Ok(g)
    }

    /// Runs `tokens` at the next positions and returns their logits:
    /// `[n_vocab]` per position for `LogitsFor::All`, the last position's for
    /// `LogitsFor::Last`.
    pub fn eval(&mut self, ctx: &mut Context, tokens: &[u32], logits_for: LogitsFor) -> Result<&[f32]> {
        let n = tokens.len();
        if n == 0 {
            return Err(Error::Model("eval needs at least one token".into()));
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.hp.n_vocab) {
            return Err(Error::Model(format!("token id {bad} is outside the vocabulary of {}", self.hp.n_vocab)));
        }
        let end = self.n_past + n;
        if end > self.kv.n_ctx {
            return Err(Error::Model(format!(
                "the context is full: {} positions used, {n} more asked, {} available",
                self.n_past, self.kv.n_ctx
            )));
        }
        let n_kv = end.next_multiple_of(KV_BUCKET).min(self.kv.n_ctx);
        let g = self.graph_for(ctx, n, n_kv, logits_for)?;
        // Undo the last placement before walking the graph: its sources still
        // read the scheduler's input copies, which alloc_graph's own reset
        // would remove from under the node lists built here.
        self.sched.reset(ctx);
        self.arena.reset();
        let graph = ctx.build_graph(&self.arena, &[g.logits])?;
        self.sched.alloc_graph(ctx, graph)?;
        let (ids, pos) = batch_inputs(tokens, self.n_past, n_kv, &mut self.mask);
        ctx.set_i32(g.tokens, &ids)?;
        ctx.set_i32(g.positions, &pos)?;
        ctx.set_i32(g.kv_slots, &pos)?;
        ctx.set_bytes(g.mask, bytemuck::cast_slice(&self.mask))?;
        self.sched.graph_compute(ctx, graph)?;
        self.n_past = end;
        let n_out = if logits_for == LogitsFor::All { n } else { 1 };
        self.logits.resize(n_out * self.hp.n_vocab, 0.0);
        ctx.read_tensor_bytes(g.logits, 0, bytemuck::cast_slice_mut(&mut self.logits))?;
        Ok(&self.logits)
    }
}
