//! Running a decoder model: batches through the scheduler, the KV cache
//! shared by sequences, logits.

use std::sync::Arc;

use gantry_arenas::GraphArena;
use gantry_engine::sched::{MemoryReport, Scheduler, SchedulerParams};
use gantry_engine::{AbortCallback, Backend, BufferType, Context, DType, Graph, Limits, Mark, TensorId};
use half::f16;

use super::kv_cells::BatchPlacement;
use super::logits_read::LogitsRead;
use super::{
    Batch, BatchShape, DecoderGraph, DecoderHparams, DecoderWeights, KvCache, KvCells, LogitsFor, SeqId,
    build_decoder_graph,
};
use crate::model::SchedulerOptions;
use crate::model::blocks::{Attention, MaskRule};
use crate::{Error, Result};

/// Cache cells are attended over in buckets of this many, so the decode graph
/// changes once every `KV_BUCKET` tokens instead of every token.
pub const KV_BUCKET: usize = 256;

/// A model ready to run: weights, a KV cache shared by any number of
/// sequences, a scheduler over the backends, and the current graph, rebuilt
/// only when the batch shape changes.
///
/// The context is the caller's (it also holds the weights); the session adds
/// its graph tensors after a mark and removes them when it rebuilds.
pub struct Session {
    hp: DecoderHparams,
    weights: DecoderWeights,
    kv: KvCache,
    cells: KvCells,
    sched: Scheduler,
    arena: GraphArena,
    graph: Option<DecoderGraph>,
    /// The node and leaf lists of `graph`, walked once: decoding reuses them
    /// for every token until the batch shape changes.
    built: BuiltGraph,
    mark: Mark,
    attention: Attention,
    // Scratch kept between batches.
    single: Batch,
    placement: BatchPlacement,
    ids: Vec<i32>,
    out_rows: Vec<i32>,
    mask: Vec<f16>,
    logits: Vec<f32>,
    /// The batch [`Session::decode_start`] started, until it is finished.
    pending: Option<Pending>,
    /// That batch's sequences (to give its cells back if it fails).
    pending_seqs: Vec<SeqId>,
    /// That batch's logits on their way to host memory.
    logits_read: LogitsRead,
}

/// A started batch: where its logits will be, and how many floats.
#[derive(Debug, Clone, Copy)]
struct Pending {
    logits: TensorId,
    n_floats: usize,
    /// Started by `decode_start`: its logits come through `logits_read`.
    started_async: bool,
}

/// Options of a [`Session`].
#[derive(Debug, Clone, Copy)]
pub struct SessionParams {
    /// Cells the KV cache holds (tokens of all sequences together).
    pub n_ctx: usize,
    /// KV cache element type (F16, F32 or Q8_0).
    pub kv_dtype: DType,
    /// Pipeline copies for the scheduler (1 = off).
    pub n_copies: usize,
    /// How attention is computed.
    pub attention: Attention,
    /// The scheduler's switches (fusion, placement report).
    pub scheduler: SchedulerOptions,
}

impl Default for SessionParams {
    /// The defaults, whatever the environment says.
    fn default() -> Self {
        Self {
            n_ctx: 2048,
            kv_dtype: DType::F16,
            n_copies: 1,
            attention: Attention::Flash,
            scheduler: SchedulerOptions::default(),
        }
    }
}

impl SessionParams {
    /// The defaults with the scheduler's environment switches
    /// (`GANTRY_NO_FUSION`, `GANTRY_SCHED_DEBUG`:
    /// [`SchedulerOptions::from_env`]).
    pub fn from_env() -> Self {
        Self { scheduler: SchedulerOptions::from_env(), ..Self::default() }
    }
}

/// Where each layer's cache goes: with its weights when the layers' weights
/// are on different backends (llama.cpp's rule, so attention reads its cache
/// where it runs), else all in the first backend's memory.
fn kv_buffer_types(ctx: &Context, weights: &DecoderWeights, backends: &[Arc<dyn Backend>]) -> Vec<Arc<dyn BufferType>> {
    let first = backends[0].device().buffer_type();
    let owner: Vec<Option<usize>> = weights
        .layers
        .iter()
        .map(|l| {
            let (entry, _) = ctx.tensor_buffer(l.wo).ok()?;
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
        hp: DecoderHparams,
        weights: DecoderWeights,
        backends: &[Arc<dyn Backend>],
        params: SessionParams,
    ) -> Result<Self> {
        hp.validate()?;
        if params.kv_dtype.is_quantized() && params.attention == Attention::Explicit {
            // Explicit attention transposes V, which a block-quantized cache cannot be
            // (llama.cpp likewise needs flash attention for a quantized V cache).
            return Err(Error::Model(format!("a {} KV cache needs flash attention", params.kv_dtype)));
        }
        if backends.is_empty() {
            return Err(Error::Model("no backends given".into()));
        }
        let n_ctx = params.n_ctx.max(1);
        // The cell table is a `Vec` of `n_ctx`, the cache `n_ctx` rows a layer.
        let limits = Limits::DEFAULT;
        limits.check_count("the context size (n_ctx)", n_ctx as u64, limits.max_context).map_err(Error::Model)?;
        let bufts = kv_buffer_types(ctx, &weights, backends);
        let kv = KvCache::new_per_layer(ctx, &hp, n_ctx, params.kv_dtype, &bufts)?;
        let sched_params =
            params.scheduler.apply(SchedulerParams { n_copies: params.n_copies, ..SchedulerParams::default() });
        let sched = Scheduler::new(backends, sched_params)?;
        let mark = ctx.mark();
        Ok(Self {
            hp,
            weights,
            kv,
            cells: KvCells::new(n_ctx),
            sched,
            arena: GraphArena::new(),
            graph: None,
            built: BuiltGraph::default(),
            mark,
            attention: params.attention,
            single: Batch::new(),
            placement: BatchPlacement::default(),
            ids: Vec::new(),
            out_rows: Vec::new(),
            mask: Vec::new(),
            logits: Vec::new(),
            pending: None,
            pending_seqs: Vec::new(),
            logits_read: LogitsRead::default(),
        })
    }

    /// The hyperparameters.
    pub fn hparams(&self) -> &DecoderHparams {
        &self.hp
    }

    /// Positions already in the KV cache for sequence 0 (what [`Session::eval`] runs).
    pub fn n_past(&self) -> usize {
        self.cells.next_pos(0)
    }

    /// The next position of `seq` (its tokens in the cache).
    pub fn seq_pos(&self, seq: SeqId) -> usize {
        self.cells.next_pos(seq)
    }

    /// Cells the KV cache holds.
    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx
    }

    /// Cells in use by all sequences.
    pub fn n_used(&self) -> usize {
        self.cells.used()
    }

    /// The scheduler (placement, splits, buffer sizes).
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    /// Installs (or removes) a profiler on the session's scheduler and its
    /// backends ([`Scheduler::set_profiler`]).
    pub fn set_profiler(&mut self, profiler: Option<Arc<gantry_engine::profile::Profiler>>) {
        self.sched.set_profiler(profiler);
    }

    /// The graph of the last batch (its tensors are in the caller's
    /// context until the next batch of another shape), if any ran.
    pub fn graph(&self) -> Option<&DecoderGraph> {
        self.graph.as_ref()
    }

    /// Bytes of the KV cache.
    pub fn kv_bytes(&self, ctx: &Context) -> usize {
        self.kv.size_bytes(ctx)
    }

    /// Forgets every sequence (a new conversation).
    pub fn clear(&mut self, ctx: &Context) -> Result<()> {
        self.not_running("clear")?;
        self.cells.clear();
        self.kv.clear(ctx)
    }

    /// Forgets sequence `seq`; its cells serve other tokens.
    pub fn remove_seq(&mut self, seq: SeqId) {
        self.cells.remove_seq(seq);
    }

    /// Keeps the first `n_keep` positions of `seq` and forgets the rest.
    pub fn truncate_seq(&mut self, seq: SeqId, n_keep: usize) {
        self.cells.truncate_seq(seq, n_keep);
    }

    /// Sizes the scheduler's memory for a batch of `n_tokens` over the whole
    /// context (the largest graph), so later batches never re-allocate.
    /// Returns what each backend's device holds; an error names a device whose
    /// memory budget ([`Session::set_budget`]) this would pass, and then
    /// nothing was allocated.
    pub fn reserve(&mut self, ctx: &mut Context, n_tokens: usize) -> Result<MemoryReport> {
        self.not_running("reserve")?;
        let g = self.graph_for(ctx, n_tokens, self.kv.n_ctx, LogitsFor::All)?;
        self.arena.reset();
        let graph = ctx.build_graph(&self.arena, &[g.logits])?;
        Ok(self.sched.reserve(ctx, graph)?)
    }

    /// Sets (or, with `None`, removes) the memory budget of `backend`'s
    /// device: weights, KV cache and compute memory together may not pass it.
    pub fn set_budget(&mut self, backend: &Arc<dyn Backend>, bytes: Option<usize>) -> Result<()> {
        Ok(self.sched.set_budget(backend, bytes)?)
    }

    /// The graph for this batch shape: the current one, or a new build.
    fn graph_for(
        &mut self,
        ctx: &mut Context,
        n_tokens: usize,
        n_kv: usize,
        logits_for: LogitsFor,
    ) -> Result<DecoderGraph> {
        let shape = BatchShape { n_tokens, n_kv, logits_for, attention: self.attention };
        if let Some(g) = self.graph
            && g.shape == shape
        {
            return Ok(g);
        }
        self.sched.reset(ctx);
        ctx.rewind(self.mark);
        self.graph = None;
        self.built.forget();
        let g = build_decoder_graph(ctx, &self.hp, &self.weights, &self.kv, shape)?;
        self.graph = Some(g);
        Ok(g)
    }

    /// Runs `tokens` at the next positions of sequence 0 and returns their
    /// logits: `[n_vocab]` per position for `LogitsFor::All`, the last
    /// position's for `LogitsFor::Last`.
    pub fn eval(&mut self, ctx: &mut Context, tokens: &[u32], logits_for: LogitsFor) -> Result<&[f32]> {
        if let LogitsFor::Rows(_) = logits_for {
            return Err(Error::Model(
                "eval gives the logits of all tokens or the last; decode takes a batch naming its rows".into(),
            ));
        }
        let mut batch = std::mem::take(&mut self.single);
        batch.clear();
        for &t in tokens {
            batch.push(t, 0, logits_for == LogitsFor::All);
        }
        if let Some(last) = batch.logits.last_mut() {
            *last = true;
        }
        let result = self.run(ctx, &batch, logits_for);
        self.single = batch;
        result?;
        Ok(&self.logits)
    }

    /// Runs a batch that may mix sequences, prompt tokens and decode tokens,
    /// each token at its sequence's next position, and returns `[n_vocab]`
    /// logits for each token whose logits were asked, in batch order.
    pub fn decode(&mut self, ctx: &mut Context, batch: &Batch) -> Result<&[f32]> {
        self.run(ctx, batch, logits_for(batch))?;
        Ok(&self.logits)
    }

    /// Installs (or removes, with `None`) a callback that stops a batch a
    /// caller no longer needs: when it returns `true`, the batch ends with
    /// `Error::Engine(engine::Error::Aborted)` and its tokens are not in the cache (the
    /// session stays usable). The scheduler polls it before each split, and
    /// each backend of the session whose device offers the
    /// [`SetAbortCallback`](gantry_engine::SetAbortCallback) extension (the CPU's) before each node (this
    /// replaces those backends' own callbacks while set); work already
    /// handed to a GPU runs to its end.
    ///
    /// A backend whose extension refuses it (a wrapper around a CPU
    /// backend, whose device is the CPU's) is left with its own callback,
    /// and a warning is logged: the scheduler's poll still stops the batch
    /// before its next split.
    pub fn set_abort_callback(&mut self, callback: Option<AbortCallback>) {
        crate::model::abort_callback::install(&mut self.sched, callback);
    }

    /// Starts [`Session::decode`]'s work and returns once it is submitted,
    /// without waiting for it: on a GPU the caller's thread is free while
    /// the batch computes. Poll [`Session::is_done`], then take the logits
    /// with [`Session::decode_finish`]. Until then the session takes no
    /// other batch, and `ctx` must not be changed.
    ///
    /// The CPU backend computes within this call (on its pool, or on the
    /// host's job system): there the call returns when the batch is done.
    pub fn decode_start(&mut self, ctx: &mut Context, batch: &Batch) -> Result<()> {
        self.not_running("decode_start")?;
        let logits_for = logits_for(batch);
        self.check(batch, logits_for)?;
        self.cells.place(&batch.seqs, &mut self.placement)?;
        match self.start(ctx, batch, logits_for, false) {
            Ok(pending) => {
                self.pending = Some(pending);
                self.pending_seqs.clear();
                self.pending_seqs.extend_from_slice(&batch.seqs);
                Ok(())
            }
            Err(e) => {
                self.cells.unplace(&batch.seqs, &self.placement);
                Err(e)
            }
        }
    }

    /// Whether the batch [`Session::decode_start`] started has finished and
    /// its logits are in host memory, answered without waiting (`true` when
    /// none is running). Logits in a GPU's memory come back by a read its
    /// backend stages ([`gantry_engine::TensorRead`]) that the first poll
    /// after the compute submits, so that `decode_finish` then only copies
    /// them.
    pub fn is_done(&mut self) -> Result<bool> {
        if self.pending.is_none() {
            return Ok(true);
        }
        let compute_done = self.sched.is_done()?;
        self.logits_read.poll(compute_done)
    }

    /// The logits of the batch [`Session::decode_start`] started (as
    /// [`Session::decode`] returns them), waiting for it if it has not
    /// finished. If it failed, its tokens are not in the cache.
    pub fn decode_finish(&mut self, ctx: &mut Context) -> Result<&[f32]> {
        let pending = self.pending.take().ok_or_else(|| Error::Model("decode_finish: no batch was started".into()))?;
        if let Err(e) = self.finish(ctx, pending) {
            self.cells.unplace(&self.pending_seqs, &self.placement);
            return Err(e);
        }
        Ok(&self.logits)
    }

    /// `Err` while a started batch runs.
    fn not_running(&self, what: &str) -> Result<()> {
        match self.pending {
            Some(_) => Err(Error::Model(format!(
                "{what}: a batch started with decode_start is still running; finish it first (decode_finish)"
            ))),
            None => Ok(()),
        }
    }

    fn run(&mut self, ctx: &mut Context, batch: &Batch, logits_for: LogitsFor) -> Result<()> {
        self.not_running("decode")?;
        self.check(batch, logits_for)?;
        self.cells.place(&batch.seqs, &mut self.placement)?;
        let result = self.start(ctx, batch, logits_for, true).and_then(|pending| self.finish(ctx, pending));
        if result.is_err() {
            // The cells were given to tokens whose keys never reached the cache.
            self.cells.unplace(&batch.seqs, &self.placement);
        }
        result
    }

    /// A batch's own checks: tokens, their sequences and logits flags.
    fn check(&self, batch: &Batch, logits_for: LogitsFor) -> Result<()> {
        let n = batch.len();
        if n == 0 || batch.seqs.len() != n || batch.logits.len() != n {
            return Err(Error::Model("a batch needs tokens, each with a sequence and a logits flag".into()));
        }
        if logits_for.n_outputs(n) == 0 {
            return Err(Error::Model("a batch must ask for the logits of at least one token".into()));
        }
        if let Some(&bad) = batch.tokens.iter().find(|&&t| t as usize >= self.hp.n_vocab) {
            return Err(Error::Model(format!("token id {bad} is outside the vocabulary of {}", self.hp.n_vocab)));
        }
        Ok(())
    }

    /// Builds (or reuses) the batch's graph, writes its inputs and starts
    /// it (`wait`: computes it to the end).
    fn start(&mut self, ctx: &mut Context, batch: &Batch, logits_for: LogitsFor, wait: bool) -> Result<Pending> {
        let n = batch.len();
        let n_kv = self.cells.extent().next_multiple_of(KV_BUCKET).min(self.kv.n_ctx);
        let g = self.graph_for(ctx, n, n_kv, logits_for)?;
        // Undo the last placement before walking the graph: its sources still
        // read the scheduler's input copies, which alloc_graph's own reset
        // would remove from under the node lists built here.
        self.sched.reset(ctx);
        // The same graph as the last batch's (the same shape): its node
        // lists as walked then. Walking ~1,000 tensors' descriptions took
        // 40 µs a token on SmolLM2 (the weights had pushed them out of the
        // caches), about 1 % of a decoded token.
        let graph = match self.built.graph_of(g.logits) {
            Some(graph) => graph,
            None => {
                self.arena.reset();
                let graph = ctx.build_graph(&self.arena, &[g.logits])?;
                self.built.keep(g.logits, graph)
            }
        };
        self.sched.alloc_graph(ctx, graph)?;
        self.ids.clear();
        self.ids.extend(batch.tokens.iter().map(|&t| t as i32));
        ctx.set_i32(g.tokens, &self.ids)?;
        ctx.set_i32(g.positions, &self.placement.positions)?;
        ctx.set_i32(g.kv_slots, &self.placement.cells)?;
        if let Some(m) = g.mask {
            self.cells.fill_mask(&batch.seqs, &self.placement.positions, n_kv, MaskRule::CAUSAL, &mut self.mask);
            ctx.set_bytes(m, bytemuck::cast_slice(&self.mask))?;
        }
        if let Some(m) = g.mask_swa {
            let rule = MaskRule { causal: true, window: self.hp.sliding_window };
            self.cells.fill_mask(&batch.seqs, &self.placement.positions, n_kv, rule, &mut self.mask);
            ctx.set_bytes(m, bytemuck::cast_slice(&self.mask))?;
        }
        if let Some(rows) = g.outputs {
            self.out_rows.clear();
            self.out_rows.extend(batch.logits.iter().enumerate().filter(|(_, l)| **l).map(|(i, _)| i as i32));
            ctx.set_i32(rows, &self.out_rows)?;
        }
        if wait {
            self.sched.graph_compute(ctx, graph)?;
        } else {
            self.sched.graph_compute_async(ctx, graph)?;
            self.logits_read.begin(ctx, g.logits)?;
        }
        Ok(Pending { logits: g.logits, n_floats: logits_for.n_outputs(n) * self.hp.n_vocab, started_async: !wait })
    }

    /// Waits for a started batch and reads its logits.
    fn finish(&mut self, ctx: &mut Context, pending: Pending) -> Result<()> {
        self.sched.synchronize()?;
        if pending.started_async {
            self.logits_read.finish(ctx, pending.n_floats, &mut self.logits)?;
        } else {
            super::logits_read::size_for(&mut self.logits, pending.n_floats)?;
            ctx.read_tensor_bytes(pending.logits, 0, bytemuck::cast_slice_mut(&mut self.logits))?;
        }
        crate::model::finite_output::ensure_finite(&self.logits, self.hp.n_vocab, "logits", "token id")
    }
}

/// Which logits a batch asks for.
fn logits_for(batch: &Batch) -> LogitsFor {
    let n_out = batch.n_outputs();
    if n_out == batch.len() {
        LogitsFor::All
    } else if n_out == 1 && batch.logits.last() == Some(&true) {
        LogitsFor::Last
    } else {
        LogitsFor::Rows(n_out)
    }
}

/// A decoder graph's node and leaf lists kept between batches (their
/// capacity too: reusing them allocates nothing).
#[derive(Debug, Default)]
struct BuiltGraph {
    /// The output the lists were walked from; `None` when there are none.
    logits: Option<TensorId>,
    nodes: Vec<TensorId>,
    leafs: Vec<TensorId>,
    outputs: Vec<TensorId>,
}

impl BuiltGraph {
    /// The kept graph, if it was walked from `logits`.
    fn graph_of(&self, logits: TensorId) -> Option<Graph<'_>> {
        (self.logits == Some(logits)).then(|| Graph::from_parts(&self.nodes, &self.leafs, &self.outputs))
    }

    /// Keeps a copy of `graph`'s lists (walked from `logits`) and returns the copy.
    fn keep(&mut self, logits: TensorId, graph: Graph<'_>) -> Graph<'_> {
        self.nodes.clear();
        self.nodes.extend_from_slice(graph.nodes());
        self.leafs.clear();
        self.leafs.extend_from_slice(graph.leafs());
        self.outputs.clear();
        self.outputs.extend_from_slice(graph.outputs());
        self.logits = Some(logits);
        Graph::from_parts(&self.nodes, &self.leafs, &self.outputs)
    }

    /// Forgets the lists (their graph's tensors are gone).
    fn forget(&mut self) {
        self.logits = None;
    }
}
