//! Loading a BERT checkpoint folder and running it: sentences tokenized
//! with their `tokenizer.json`, batched and padded, through the graph.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gantry_arenas::GraphArena;
use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::{AbortCallback, Backend, Context, Device, Limits, Mark};
use half::f16;
use tokenizers::{PostProcessor, Tokenizer, TruncationParams};

use super::{BertConfig, BertGraph, BertWeights, build_bert_graph};
use crate::model::blocks::{Attention, mask_value};
use crate::model::safetensors::SafetensorsFile;
use crate::model::{LoadOptions, LoadedWeights, SchedulerOptions, load_tensors};
use crate::{Error, Result};

/// A BERT checkpoint loaded into a context: configuration, weights (over
/// the file mapping where the device reads host memory), tokenizer.
pub struct BertModel {
    /// `config.json`.
    pub config: BertConfig,
    /// The weights by role.
    pub weights: BertWeights,
    /// `tokenizer.json`, padding off (batches are padded by the encoder).
    pub tokenizer: Tokenizer,
    /// The loaded tensors and their buffers.
    pub loaded: LoadedWeights,
    /// The weights file (kept open: weights may point into its mapping).
    pub file: SafetensorsFile,
    /// `sentence_bert_config.json`'s `do_lower_case`: texts are lowercased
    /// before they are tokenized, as sentence-transformers does.
    pub lower_case: bool,
    /// Whether the pooled vectors are L2-normalised: a sentence-transformers
    /// folder whose `modules.json` lists no `Normalize` module gives the
    /// plain means (a plain folder is normalised, as all-MiniLM-L6-v2).
    pub normalize: bool,
}

/// One tokenized sentence: token ids and token types.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodedBatch {
    /// Token ids of each sentence (with `[CLS]` and `[SEP]`).
    pub ids: Vec<Vec<u32>>,
    /// Token types of each sentence.
    pub type_ids: Vec<Vec<u32>>,
}

impl BertModel {
    /// Loads `dir/config.json`, `dir/model.safetensors` and
    /// `dir/tokenizer.json` for `device`. Errors name the file and the key
    /// or tensor; on error nothing is left in `ctx`.
    pub fn load(dir: impl AsRef<Path>, ctx: &mut Context, device: &dyn Device) -> Result<Self> {
        Self::load_with(dir, ctx, device, true)
    }

    /// [`BertModel::load`] with `model.safetensors` memory-mapped when
    /// `mmap`, else read into memory (`--no-mmap`: a file truncated or
    /// rewritten while mapped kills the process with `SIGBUS`).
    pub fn load_with(dir: impl AsRef<Path>, ctx: &mut Context, device: &dyn Device, mmap: bool) -> Result<Self> {
        let dir = dir.as_ref();
        let path = |f: &str| -> PathBuf { dir.join(f) };
        let config = BertConfig::from_file(&path("config.json"))?;
        let normalize = super::modules::check_modules(dir, config.hidden_size)?;
        let sentence = super::modules::sentence_config(dir)?;
        let tokenizer = load_tokenizer(&path("tokenizer.json"), &config, sentence.max_seq_length)?;
        let weights = path("model.safetensors");
        let file = if mmap { SafetensorsFile::open(weights)? } else { SafetensorsFile::read(weights)? };
        let loaded = load_tensors(&file, ctx, device, LoadOptions::default())?;
        let names: HashMap<String, _> = loaded.iter().map(|(n, t)| (n.to_owned(), t)).collect();
        let unloadable = file.unloadable();
        match BertWeights::from_names(ctx, file.source(), &names, &unloadable, &config, &device.buffer_type()) {
            Ok(weights) => {
                Ok(Self { config, weights, tokenizer, loaded, file, lower_case: sentence.do_lower_case, normalize })
            }
            Err(e) => {
                loaded.unload(ctx);
                Err(e)
            }
        }
    }

    /// The token ids and types of each text, with the special tokens.
    pub fn tokenize(&self, texts: &[&str]) -> Result<EncodedBatch> {
        let mut batch = EncodedBatch::default();
        for &text in texts {
            let lowered;
            let text = if self.lower_case {
                lowered = text.to_lowercase();
                lowered.as_str()
            } else {
                text
            };
            let enc = encode(&self.tokenizer, text).map_err(|e| Error::Model(format!("tokenizing {text:?}: {e}")))?;
            batch.ids.push(enc.get_ids().to_vec());
            batch.type_ids.push(enc.get_type_ids().to_vec());
        }
        Ok(batch)
    }
}

/// `tokenizer.encode(text)` with the special tokens; a panic inside the
/// `tokenizers` crate (a post-processor template naming a special token it
/// does not define panics there on every text) is an error, not the end of
/// the thread.
fn encode(tokenizer: &Tokenizer, text: &str) -> std::result::Result<tokenizers::Encoding, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tokenizer.encode(text, true))) {
        Ok(encoded) => encoded.map_err(|e| e.to_string()),
        Err(panic) => Err(format!("the tokenizer failed ({})", crate::model::caught_panic::message(&*panic))),
    }
}

/// Reads `tokenizer.json` with the `tokenizers` crate: padding off,
/// truncation to the positions the model has, or to a sentence-transformers
/// folder's `max_seq_length` when that is fewer (the file's own truncation,
/// 128 for all-MiniLM-L6-v2, is what sentence-transformers replaces too).
fn load_tokenizer(path: &Path, config: &BertConfig, max_seq_length: Option<usize>) -> Result<Tokenizer> {
    let file = path.display().to_string();
    let bad = |reason: String| Error::InvalidModel { file: file.clone(), reason };
    crate::model::regular_file::check_regular(path)?;
    // The `tokenizers` crate panics on some malformed parts (a normalizer's
    // precompiled charsmap that does not parse): an error like any other.
    let read = std::panic::catch_unwind(|| Tokenizer::from_file(path))
        .map_err(|_| bad("not a tokenizer file: the tokenizers crate could not read it".into()))?;
    let mut tokenizer = read.map_err(|e| bad(format!("not a tokenizer file: {e}")))?;
    tokenizer.with_padding(None);
    // `tokenizers` subtracts the special tokens from the truncation length
    // unchecked: a length not above them overflows (a panic, or a huge
    // length in a release build).
    let added = tokenizer.get_post_processor().map_or(0, |p| p.added_tokens(false));
    let (max_length, key) = match max_seq_length {
        Some(n) if n < config.max_position_embeddings => (n, "sentence_bert_config.json's max_seq_length"),
        _ => (config.max_position_embeddings, "config.json's max_position_embeddings"),
    };
    if max_length <= added {
        return Err(bad(format!(
            "{key} = {max_length} leaves no room beside the {added} special tokens the post-processor adds"
        )));
    }
    let truncation = TruncationParams { max_length, ..TruncationParams::default() };
    tokenizer.with_truncation(Some(truncation)).map_err(|e| bad(format!("truncation: {e}")))?;
    // A tokenizer that cannot encode (its post-processor or normalizer
    // broken) is refused here, by file, rather than failing every request.
    encode(&tokenizer, "a").map_err(|e| bad(format!("it cannot encode a text: {e}")))?;
    let vocab = tokenizer.get_vocab_size(true);
    if vocab > config.vocab_size {
        return Err(bad(format!(
            "the vocabulary has {vocab} tokens, config.json's vocab_size says {}",
            config.vocab_size
        )));
    }
    Ok(tokenizer)
}

/// Options of an [`Encoder`]. The default ignores the environment
/// ([`EncoderParams::from_env`] reads the scheduler's switches).
#[derive(Debug, Clone, Copy, Default)]
pub struct EncoderParams {
    /// How attention is computed.
    pub attention: Attention,
    /// The scheduler's switches (fusion, placement report).
    pub scheduler: SchedulerOptions,
}

impl EncoderParams {
    /// The defaults with the scheduler's environment switches
    /// (`GANTRY_NO_FUSION`, `GANTRY_SCHED_DEBUG`:
    /// [`SchedulerOptions::from_env`]).
    pub fn from_env() -> Self {
        Self { scheduler: SchedulerOptions::from_env(), ..Self::default() }
    }
}

/// A BERT model ready to run: a scheduler over the backends and the current
/// graph, rebuilt only when the batch's shape (sentences, padded length) changes.
pub struct Encoder {
    config: BertConfig,
    weights: BertWeights,
    sched: Scheduler,
    arena: GraphArena,
    graph: Option<BertGraph>,
    mark: Mark,
    attention: Attention,
    normalize: bool,
    // Scratch kept between batches.
    inputs: [Vec<i32>; 3],
    mask: Vec<f16>,
    pooling: Vec<f32>,
}

impl Encoder {
    /// An encoder over `backends` (priority order, CPU last).
    pub fn new(
        ctx: &mut Context,
        model: &BertModel,
        backends: &[Arc<dyn Backend>],
        params: EncoderParams,
    ) -> Result<Self> {
        let sched = Scheduler::new(backends, params.scheduler.apply(SchedulerParams::default()))?;
        Ok(Self {
            config: model.config.clone(),
            weights: model.weights.clone(),
            sched,
            arena: GraphArena::new(),
            graph: None,
            mark: ctx.mark(),
            attention: params.attention,
            normalize: model.normalize,
            inputs: Default::default(),
            mask: Vec::new(),
            pooling: Vec::new(),
        })
    }

    /// The scheduler (placement, splits, buffer sizes).
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    /// Installs (or removes, with `None`) a callback that stops a batch no
    /// one needs any more: when it returns `true`, [`Encoder::embed`] ends
    /// with `Error::Engine(engine::Error::Aborted)` and the encoder stays
    /// usable. It is polled before each split and, on the CPU, before each
    /// node, as [`Session::set_abort_callback`](crate::model::decoder::Session::set_abort_callback)'s is.
    ///
    /// A server ends a request at its deadline:
    ///
    /// ```no_run
    /// # use std::{sync::Arc, time::{Duration, Instant}};
    /// # fn demo(encoder: &mut gantry::model::bert::Encoder) {
    /// let deadline = Instant::now() + Duration::from_secs(10);
    /// encoder.set_abort_callback(Some(Arc::new(move || Instant::now() >= deadline)));
    /// # }
    /// ```
    pub fn set_abort_callback(&mut self, callback: Option<AbortCallback>) {
        crate::model::abort_callback::install(&mut self.sched, callback);
    }

    /// The embedding of each sentence (L2-normalised unless the folder says
    /// otherwise: [`BertModel::normalize`]), `[n][hidden]` in one
    /// vector: the sentences padded to the longest and run as one graph.
    pub fn embed(&mut self, ctx: &mut Context, batch: &EncodedBatch) -> Result<Vec<f32>> {
        let n_seq = batch.ids.len();
        let n_tokens = batch.ids.iter().map(Vec::len).max().unwrap_or(0);
        if n_seq == 0 || n_tokens == 0 || batch.type_ids.len() != n_seq {
            return Err(Error::Model("a batch needs at least one sentence of at least one token".into()));
        }
        // Positions index the position embeddings: a longer sentence would
        // read past them (the tokenizer truncates, a caller's batch may not).
        if n_tokens > self.config.max_position_embeddings {
            return Err(Error::Model(format!(
                "a sentence of {n_tokens} tokens is longer than the model's {} positions (max_position_embeddings)",
                self.config.max_position_embeddings
            )));
        }
        // The mask holds n_tokens² entries per sentence.
        let mask_len = Limits::DEFAULT
            .check_shape(&[n_tokens, n_tokens, 1, n_seq])
            .map_err(|e| Error::Model(format!("the attention mask of {n_seq} sentences of {n_tokens} tokens: {e}")))?;
        self.mask.clear();
        usize::try_from(mask_len).ok().and_then(|n| self.mask.try_reserve(n).ok()).ok_or_else(|| {
            Error::Model(format!("no memory for the attention mask of {n_seq} sentences of {n_tokens} tokens"))
        })?;
        if let Some(&bad) = batch.ids.iter().flatten().find(|&&t| t as usize >= self.config.vocab_size) {
            return Err(Error::Model(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        if let Some(&bad) = batch.type_ids.iter().flatten().find(|&&t| t as usize >= self.config.type_vocab_size) {
            return Err(Error::Model(format!("token type {bad} is outside the {} types", self.config.type_vocab_size)));
        }
        let g = match self.graph {
            Some(g) if g.n_tokens == n_tokens && g.n_seq == n_seq => g,
            _ => {
                self.sched.reset(ctx);
                ctx.rewind(self.mark);
                self.graph = None;
                let g = build_bert_graph(
                    ctx,
                    &self.config,
                    &self.weights,
                    n_tokens,
                    n_seq,
                    self.attention,
                    self.normalize,
                )?;
                self.graph = Some(g);
                g
            }
        };
        self.fill_inputs(batch, n_tokens);
        self.sched.reset(ctx);
        self.arena.reset();
        let graph = ctx.build_graph(&self.arena, &[g.embeddings])?;
        self.sched.alloc_graph(ctx, graph)?;
        ctx.set_i32(g.tokens, &self.inputs[0])?;
        ctx.set_i32(g.positions, &self.inputs[1])?;
        ctx.set_i32(g.token_types, &self.inputs[2])?;
        ctx.set_bytes(g.mask, bytemuck::cast_slice(&self.mask))?;
        ctx.set_f32(g.pooling, &self.pooling)?;
        self.sched.graph_compute(ctx, graph)?;
        let embeddings = ctx.read_f32(g.embeddings)?;
        crate::model::finite_output::ensure_finite(&embeddings, self.config.hidden_size, "embeddings", "dimension")?;
        Ok(embeddings)
    }

    /// Pads each sentence to `n_tokens`: ids and types 0, positions 0, keys
    /// masked, pooling weight 0.
    fn fill_inputs(&mut self, batch: &EncodedBatch, n_tokens: usize) {
        let [ids, pos, types] = &mut self.inputs;
        for v in [&mut *ids, &mut *pos, &mut *types] {
            v.clear();
        }
        self.mask.clear();
        self.pooling.clear();
        for (sentence, type_ids) in batch.ids.iter().zip(&batch.type_ids) {
            let len = sentence.len();
            for i in 0..n_tokens {
                ids.push(sentence.get(i).map_or(0, |&t| t as i32));
                types.push(type_ids.get(i).map_or(0, |&t| t as i32));
                pos.push(if i < len { i as i32 } else { 0 });
                self.pooling.push(if i < len { 1.0 / len as f32 } else { 0.0 });
            }
            for _query in 0..n_tokens {
                self.mask.extend((0..n_tokens).map(|key| mask_value(key < len)));
            }
        }
    }
}
