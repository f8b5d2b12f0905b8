//! The scheduler loop: one thread owns the model's context and session and
//! runs step after step. Each step's batch holds every generating
//! sequence's next token and chunks of waiting prompts up to
//! `--batch-size` tokens, so a new request joins at the next step and a
//! long prompt never stalls the others. A finished, cancelled or timed-out
//! request frees its slot at once; its cells stay as that slot's cache for
//! a later request sharing a prefix (`--cache-reuse`), or are freed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use gantry::Context;
use gantry::engine::BackendErrorKind;
use gantry::model::decoder::{Batch, SeqId, Session};
use gantry::model::tokenizer::{Tokenizer, take_complete_utf8};

use crate::error::ApiError;
use crate::job::{Event, FinishReason, Job, Usage};
use crate::metrics::Metrics;
use crate::stop_strings::StopStrings;
use crate::token_choice::{TokenChooser, logprobs};

/// How often an idle engine looks at the shutdown flag.
const IDLE_POLL: Duration = Duration::from_millis(50);

/// The engine's settings (from [`crate::ServeOptions`]).
#[derive(Debug, Clone, Copy)]
pub struct EngineSettings {
    /// Slots: sequences running together.
    pub parallel: usize,
    /// Most tokens per step.
    pub batch_size: usize,
    /// Tokens one sequence may hold (prompt and generated).
    pub seq_ctx: usize,
    /// Keep finished sequences' cells for prefix reuse.
    pub cache_reuse: bool,
    /// How long running requests may take to finish once shutdown starts.
    pub shutdown_grace: Duration,
}

/// A request running on a slot.
struct Running {
    job: Job,
    /// Prompt tokens whose keys are in the cache.
    prompt_done: usize,
    /// Prompt tokens reused from the slot's cache.
    reused: usize,
    chooser: TokenChooser,
    stops: StopStrings,
    /// Bytes of an unfinished UTF-8 character.
    pending_utf8: Vec<u8>,
    generated: usize,
    /// A chosen token not yet run (fed at the next step).
    next: Option<u32>,
    last_token_at: Option<Instant>,
}

/// A sequence of the KV cache and what it holds.
struct Slot {
    seq: SeqId,
    /// The tokens whose keys the cache holds for this sequence, in order.
    cached: Vec<u32>,
    running: Option<Running>,
}

/// What one batch row (a token whose logits were asked) belongs to.
#[derive(Clone, Copy)]
struct Row {
    slot: usize,
}

/// The loop's state.
pub struct Engine {
    ctx: Context,
    session: Session,
    tokenizer: Arc<Tokenizer>,
    settings: EngineSettings,
    metrics: Arc<Metrics>,
    slots: Vec<Slot>,
    batch: Batch,
    rows: Vec<Row>,
    /// Tokens each slot adds to the cache in the running step.
    fed: Vec<usize>,
    /// Slots whose request ended in the running step, and how (kept to reuse its memory).
    finished: Vec<(usize, Result<FinishReason, ApiError>)>,
    /// The slot whose prompt goes first in the next step (round robin).
    prompt_turn: usize,
    n_vocab: usize,
    /// Set to the error once a batch lost a device (the server's `decoder_lost`).
    lost: Arc<OnceLock<String>>,
}

impl Engine {
    /// An engine over `session` (its KV cache holds at least
    /// `parallel * seq_ctx` cells).
    pub fn new(
        ctx: Context,
        session: Session,
        tokenizer: Arc<Tokenizer>,
        settings: EngineSettings,
        metrics: Arc<Metrics>,
        lost: Arc<OnceLock<String>>,
    ) -> Self {
        let slots =
            (0..settings.parallel).map(|i| Slot { seq: i as SeqId, cached: Vec::new(), running: None }).collect();
        Metrics::set(&metrics.slots_total, settings.parallel as u64);
        Metrics::set(&metrics.kv_cells_total, session.n_ctx() as u64);
        let n_vocab = tokenizer.n_vocab();
        Self {
            ctx,
            session,
            tokenizer,
            settings,
            metrics,
            slots,
            batch: Batch::new(),
            rows: Vec::new(),
            fed: vec![0; settings.parallel],
            finished: Vec::new(),
            prompt_turn: 0,
            n_vocab,
            lost,
        }
    }

    /// Runs until `incoming` closes, or `draining` is set and the running
    /// requests have finished (or the grace period ended them).
    pub fn run(mut self, incoming: Receiver<Job>, draining: Arc<AtomicBool>) {
        let mut grace_end: Option<Instant> = None;
        let mut open = true;
        loop {
            if draining.load(Ordering::SeqCst) {
                let end = *grace_end.get_or_insert_with(|| Instant::now() + self.settings.shutdown_grace);
                // Nothing new starts; whoever waits is told why.
                while let Ok(job) = incoming.try_recv() {
                    Metrics::sub_queue(&self.metrics);
                    self.refuse(&job, ApiError::unavailable("the server is shutting down"));
                }
                if Instant::now() >= end {
                    for i in 0..self.slots.len() {
                        self.fail(i, ApiError::unavailable("the server shut down before this request finished"));
                    }
                }
                if self.busy() == 0 {
                    break;
                }
            } else if open {
                open = self.admit(&incoming);
            }
            if self.busy() == 0 {
                if !open {
                    break;
                }
                // Idle: wait for a request (or the shutdown flag).
                match incoming.recv_timeout(IDLE_POLL) {
                    Ok(job) => {
                        Metrics::sub_queue(&self.metrics);
                        self.start(job);
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
                continue;
            }
            self.step();
        }
        tracing::info!("the engine stopped");
    }

    /// Moves waiting requests onto free slots; `false` once the channel closed.
    fn admit(&mut self, incoming: &Receiver<Job>) -> bool {
        while self.busy() < self.slots.len() {
            match incoming.try_recv() {
                Ok(job) => {
                    Metrics::sub_queue(&self.metrics);
                    self.start(job);
                }
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return false,
            }
        }
        true
    }

    fn busy(&self) -> usize {
        self.slots.iter().filter(|s| s.running.is_some()).count()
    }

    /// Tells `job`'s route it failed (the route counts it, whole or streamed).
    fn refuse(&self, job: &Job, error: ApiError) {
        let _ = job.events.send(Event::Failed(error));
    }

    /// Puts `job` on the free slot whose cache shares the longest prefix with
    /// its prompt (without reuse: any free slot, emptied).
    fn start(&mut self, job: Job) {
        if job.prompt.is_empty() || job.prompt.len() >= self.settings.seq_ctx {
            // The routes check this; a job that slips through is refused, not run.
            let e = ApiError::bad_request_code(
                "context_length_exceeded",
                format!(
                    "the prompt has {} tokens; a sequence holds {} (prompt and reply)",
                    job.prompt.len(),
                    self.settings.seq_ctx
                ),
            );
            self.refuse(&job, e);
            return;
        }
        let common = |cached: &[u32]| cached.iter().zip(&job.prompt).take_while(|(a, b)| a == b).count();
        let free = self.slots.iter().enumerate().filter(|(_, s)| s.running.is_none());
        let Some(i) = (if self.settings.cache_reuse {
            // Longest shared prefix; among equals, the slot caching least (keep others' caches).
            free.max_by_key(|(_, s)| (common(&s.cached), std::cmp::Reverse(s.cached.len()))).map(|(i, _)| i)
        } else {
            free.map(|(i, _)| i).next()
        }) else {
            self.refuse(&job, ApiError::internal("no free slot"));
            return;
        };
        let slot = &mut self.slots[i];
        // At least the prompt's last token runs, for its logits.
        let keep = if self.settings.cache_reuse { common(&slot.cached).min(job.prompt.len() - 1) } else { 0 };
        self.session.truncate_seq(slot.seq, keep);
        slot.cached.truncate(keep);
        Metrics::add(&self.metrics.prompt_tokens, job.prompt.len() as u64);
        Metrics::add(&self.metrics.prompt_tokens_reused, keep as u64);
        Metrics::add(&self.metrics.slots_busy, 1);
        slot.running = Some(Running {
            chooser: TokenChooser::new(&job.params, &job.prompt, self.tokenizer.eog_tokens()),
            stops: StopStrings::new(job.params.stop.clone()),
            job,
            prompt_done: keep,
            reused: keep,
            pending_utf8: Vec::new(),
            generated: 0,
            next: None,
            last_token_at: None,
        });
    }

    /// One batch: cancellations and deadlines first, then every generating
    /// sequence's token, then prompt chunks; then each row's next token.
    fn step(&mut self) {
        let now = Instant::now();
        for i in 0..self.slots.len() {
            let Some(r) = &self.slots[i].running else { continue };
            if r.job.events.is_closed() {
                Metrics::add(&self.metrics.requests_cancelled, 1);
                self.release(i);
            } else if now >= r.job.deadline {
                let secs = r.job.deadline.duration_since(r.job.arrived).as_secs_f64();
                self.fail(i, ApiError::timed_out(secs));
            }
        }
        self.batch.clear();
        self.rows.clear();
        self.fed.iter_mut().for_each(|f| *f = 0);
        for (i, slot) in self.slots.iter().enumerate() {
            if let Some(token) = slot.running.as_ref().and_then(|r| r.next) {
                self.batch.push(token, slot.seq, true);
                self.rows.push(Row { slot: i });
                self.fed[i] = 1;
            }
        }
        let mut budget = self.settings.batch_size.saturating_sub(self.batch.len());
        let n = self.slots.len();
        for k in 0..n {
            let i = (self.prompt_turn + k) % n;
            let slot = &self.slots[i];
            let Some(r) = &slot.running else { continue };
            let left = r.job.prompt.len() - r.prompt_done;
            if r.next.is_some() || left == 0 || budget == 0 {
                continue;
            }
            let take = left.min(budget);
            let chunk = &r.job.prompt[r.prompt_done..r.prompt_done + take];
            for (j, &t) in chunk.iter().enumerate() {
                let last = j + 1 == take && take == left;
                self.batch.push(t, slot.seq, last);
                if last {
                    self.rows.push(Row { slot: i });
                }
            }
            self.fed[i] = take;
            budget -= take;
        }
        self.prompt_turn = (self.prompt_turn + 1) % n.max(1);
        if self.batch.is_empty() {
            return;
        }
        // A step of prompt chunks that all go on past it asks for no logits,
        // which a batch must: its last token's row is asked for and left unread
        // (no `Row` names it), one row of the output product.
        if self.rows.is_empty()
            && let Some(last) = self.batch.logits.last_mut()
        {
            *last = true;
        }
        let result = self.session.decode(&mut self.ctx, &self.batch);
        Metrics::add(&self.metrics.steps, 1);
        let logits = match result {
            Ok(logits) => logits,
            Err(e) => {
                tracing::error!(error = %e, "a batch failed");
                if loses_a_device(&e) {
                    let _ = self.lost.set(e.to_string());
                }
                let message = format!("the model failed on this batch: {e}");
                for i in 0..self.slots.len() {
                    if self.fed[i] > 0 {
                        self.fail(i, ApiError::internal(message.clone()));
                    }
                }
                return;
            }
        };
        // The fed tokens are in the cache now.
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(r) = &mut slot.running else { continue };
            match r.next.take() {
                Some(t) => slot.cached.push(t),
                None if self.fed[i] > 0 => {
                    let from = r.prompt_done;
                    r.prompt_done += self.fed[i];
                    slot.cached.extend_from_slice(&r.job.prompt[from..r.prompt_done]);
                }
                None => {}
            }
        }
        // Rows are in batch order: each slot has at most one.
        let n_vocab = self.n_vocab;
        let mut finished = std::mem::take(&mut self.finished);
        for (k, row) in self.rows.iter().enumerate() {
            let Some(row_logits) = logits.get(k * n_vocab..(k + 1) * n_vocab) else { continue };
            let slot = &mut self.slots[row.slot];
            let Some(r) = &mut slot.running else { continue };
            if let Some(reason) =
                choose_next(r, row_logits, slot.cached.len(), &self.tokenizer, &self.settings, &self.metrics)
            {
                finished.push((row.slot, reason));
            }
        }
        for (i, outcome) in finished.drain(..) {
            match outcome {
                Ok(reason) => self.finish(i, reason),
                Err(e) => self.fail(i, e),
            }
        }
        self.finished = finished;
        Metrics::set(&self.metrics.kv_cells_used, self.session.n_used() as u64);
    }

    /// Ends slot `i`'s request normally: the held text, then `Done`.
    fn finish(&mut self, i: usize, reason: FinishReason) {
        let Some(r) = &mut self.slots[i].running else { return };
        // A stop string cleared what was held; an end token or the length releases it.
        let mut tail = r.stops.finish();
        if !r.pending_utf8.is_empty() {
            tail.push_str(&String::from_utf8_lossy(&r.pending_utf8));
        }
        if !tail.is_empty() {
            let _ = r.job.events.send(Event::Text(tail));
        }
        let usage =
            Usage { prompt_tokens: r.job.prompt.len(), completion_tokens: r.generated, cached_tokens: r.reused };
        let _ = r.job.events.send(Event::Done { finish: reason, usage });
        Metrics::add(&self.metrics.requests_ok, 1);
        self.release(i);
    }

    /// Ends slot `i`'s request with `error` (if one runs there).
    fn fail(&mut self, i: usize, error: ApiError) {
        let Some(r) = &self.slots[i].running else { return };
        let _ = r.job.events.send(Event::Failed(error));
        self.release(i);
    }

    /// Frees slot `i`: its cells stay as its cache with reuse on, else go.
    fn release(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        if slot.running.take().is_some() {
            Metrics::sub(&self.metrics.slots_busy, 1);
        }
        if !self.settings.cache_reuse {
            self.session.remove_seq(slot.seq);
            slot.cached.clear();
        }
        Metrics::set(&self.metrics.kv_cells_used, self.session.n_used() as u64);
    }
}

/// Whether a failed batch lost a device (a GPU reset, a remote peer gone):
/// the layers and cache on it are gone, so every later batch would fail
/// too and the decoder is reported unavailable. Any other failure (a bad
/// value, memory) ends that batch's requests only.
fn loses_a_device(e: &gantry::Error) -> bool {
    matches!(e.backend_kind(), Some(BackendErrorKind::DeviceLost | BackendErrorKind::Transport))
}

/// A reply's grammar failing partway: the request's schema asked for more
/// than llguidance follows (a pattern repeated past its limits), so the
/// request is refused, not the server's fault.
fn grammar_failed(generated: usize, e: &gantry::Error) -> ApiError {
    ApiError::bad_request(format!(
        "the reply's grammar (`response_format` or `tools`) failed after {generated} tokens: {}",
        e.detail()
    ))
}

/// Chooses a request's next token from its row of logits and reports it;
/// `Some` when the request is done (`Err`: it failed).
fn choose_next(
    r: &mut Running,
    row: &[f32],
    cached: usize,
    tokenizer: &Tokenizer,
    settings: &EngineSettings,
    metrics: &Metrics,
) -> Option<Result<FinishReason, ApiError>> {
    let token = match r.chooser.choose(row, r.job.constraint.as_mut()) {
        Ok(t) => t,
        Err(e) => return Some(Err(grammar_failed(r.generated, &e))),
    };
    let now = Instant::now();
    match r.last_token_at {
        None => metrics.time_to_first_token.observe(now.duration_since(r.job.arrived)),
        Some(t) => metrics.inter_token_latency.observe(now.duration_since(t)),
    }
    r.last_token_at = Some(now);
    if tokenizer.is_eog(token) {
        return Some(Ok(FinishReason::Stop));
    }
    r.chooser.accept(token);
    if let Some(c) = &mut r.job.constraint
        && let Err(e) = c.accept(token)
    {
        return Some(Err(grammar_failed(r.generated, &e)));
    }
    r.generated += 1;
    Metrics::add(&metrics.generated_tokens, 1);
    let lp = r.job.params.logprobs.map(|top| logprobs(row, token, top));
    let piece = tokenizer.token_to_piece(token, false).unwrap_or_default();
    r.pending_utf8.extend_from_slice(piece);
    let text = take_complete_utf8(&mut r.pending_utf8);
    let released = r.stops.push(&text);
    let _ = r.job.events.send(Event::Token { text: released.text, logprobs: lp });
    if released.stopped {
        return Some(Ok(FinishReason::Stop));
    }
    // The chosen token would need one more cell of the sequence's context.
    if r.generated >= r.job.params.max_tokens || cached + 1 > settings.seq_ctx {
        return Some(Ok(FinishReason::Length));
    }
    r.next = Some(token);
    None
}

#[cfg(test)]
mod tests {
    use gantry::engine::{BackendErrorKind, Error as EngineError};

    use super::loses_a_device;

    #[test]
    fn only_a_lost_device_or_connection_makes_the_decoder_unavailable() {
        let backend = |kind| gantry::Error::Engine(EngineError::backend("remote0", kind, "peer 127.0.0.1:1"));
        assert!(loses_a_device(&backend(BackendErrorKind::DeviceLost)));
        assert!(loses_a_device(&backend(BackendErrorKind::Transport)));
        // Kept through the context a split adds when the scheduler reports it.
        let in_split = backend(BackendErrorKind::Transport);
        let gantry::Error::Engine(inner) = in_split else { unreachable!() };
        assert!(loses_a_device(&gantry::Error::Engine(inner.within_backend("remote0", "split 3"))));
        assert!(!loses_a_device(&backend(BackendErrorKind::OutOfDeviceMemory)));
        assert!(!loses_a_device(&gantry::Error::Model("a bad prompt".into())));
    }
}
