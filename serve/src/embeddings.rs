//! `/v1/embeddings` over a BERT folder: a thread of its own owns the
//! encoder's context and computes each request's inputs in batches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use gantry::Context;
use gantry::model::bert::{BertModel, Encoder};
use tokio::sync::oneshot;

use crate::error::ApiError;
use crate::metrics::Metrics;

/// Most inputs one request may embed.
pub const MAX_INPUTS: usize = 2048;
/// Inputs per batch (the attention mask grows with inputs × tokens²).
const BATCH: usize = 32;

/// A loaded embedding model: what the thread owns.
pub struct EmbedderSetup {
    /// Its context (weights and compute memory).
    pub ctx: Context,
    /// The model (tokenizer and weights).
    pub model: BertModel,
    /// The encoder over the model's backends.
    pub encoder: Encoder,
    /// The name `/v1/models` lists and requests ask for.
    pub name: String,
}

/// Vectors of a request's inputs, in order, and their token count.
#[derive(Debug)]
pub struct Embedded {
    /// One vector per input (of unit length unless the folder asks for the plain mean).
    pub vectors: Vec<Vec<f32>>,
    /// Tokens of all inputs (with the model's special tokens).
    pub tokens: usize,
}

/// A request for the embedding thread.
pub struct EmbeddingJob {
    /// The inputs.
    pub texts: Vec<String>,
    /// Where the result goes.
    pub reply: oneshot::Sender<Result<Embedded, ApiError>>,
    /// When the request's `--timeout` runs out: the work stops there (or
    /// once the client has gone), between two nodes of the batch being
    /// computed, so that a timed-out request does not hold the thread for
    /// the ones behind it.
    pub deadline: Instant,
    /// The `--timeout` the deadline was set by (for the 504's message).
    pub timeout: Duration,
    /// The route holds the `Arc` while it waits for the reply: once it has
    /// gone (answered 504, or its client left) no one waits.
    pub waiter: Weak<()>,
}

impl EmbeddingJob {
    /// Whether no one waits for the rest: a callback the encoder polls
    /// between nodes.
    fn abandoned(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let (waiter, deadline) = (self.waiter.clone(), self.deadline);
        move || waiter.strong_count() == 0 || Instant::now() >= deadline
    }
}

/// Runs embedding jobs until the channel closes, or `draining` is set and
/// no job waits.
pub fn run(mut setup: EmbedderSetup, jobs: Receiver<EmbeddingJob>, metrics: Arc<Metrics>, draining: Arc<AtomicBool>) {
    loop {
        let job = match jobs.recv_timeout(Duration::from_millis(50)) {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) if draining.load(Ordering::SeqCst) => return,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        Metrics::sub_queue(&metrics);
        if job.reply.is_closed() {
            continue;
        }
        let abandoned = Arc::new(job.abandoned());
        setup.encoder.set_abort_callback(Some(abandoned.clone()));
        let result = embed(&mut setup, &job, &*abandoned);
        setup.encoder.set_abort_callback(None);
        // Failures are counted by the route that answers them.
        if let Ok(e) = &result {
            Metrics::add(&metrics.embedding_inputs, e.vectors.len() as u64);
            Metrics::add(&metrics.requests_ok, 1);
        }
        let _ = job.reply.send(result);
    }
}

fn embed(setup: &mut EmbedderSetup, job: &EmbeddingJob, abandoned: &dyn Fn() -> bool) -> Result<Embedded, ApiError> {
    // Past the deadline the route answers 504 too, whichever of the two ends
    // first; a client that has gone sees nothing.
    let ended = || {
        if Instant::now() >= job.deadline {
            ApiError::timed_out(job.timeout.as_secs_f64())
        } else {
            ApiError::unavailable("the request ended before its inputs were embedded")
        }
    };
    let dim = setup.model.config.hidden_size;
    let mut out = Embedded { vectors: Vec::with_capacity(job.texts.len()), tokens: 0 };
    for chunk in job.texts.chunks(BATCH) {
        // No one waits for the rest (the route answered 504, or the client left).
        if abandoned() {
            return Err(ended());
        }
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let batch = setup.model.tokenize(&refs).map_err(|e| ApiError::bad_request(e.to_string()))?;
        out.tokens += batch.ids.iter().map(Vec::len).sum::<usize>();
        let vectors = setup.encoder.embed(&mut setup.ctx, &batch).map_err(|e| {
            // Stopped by the callback: the same reason as between batches.
            if abandoned() { ended() } else { ApiError::internal(format!("the embedding model failed: {e}")) }
        })?;
        out.vectors.extend(vectors.chunks(dim).map(<[f32]>::to_vec));
    }
    Ok(out)
}
