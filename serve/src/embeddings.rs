//! `/v1/embeddings` over a BERT folder: a thread of its own owns the
//! encoder's context and computes each request's inputs in batches.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
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
    /// One unit vector per input.
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
    /// When the request's `--timeout` runs out: the work stops at the next
    /// batch past it (or once the client has gone), so that a timed-out
    /// request does not hold the thread for the ones behind it.
    pub deadline: Instant,
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
        let result = embed(&mut setup, &job);
        // Failures are counted by the route that answers them.
        if let Ok(e) = &result {
            Metrics::add(&metrics.embedding_inputs, e.vectors.len() as u64);
            Metrics::add(&metrics.requests_ok, 1);
        }
        let _ = job.reply.send(result);
    }
}

fn embed(setup: &mut EmbedderSetup, job: &EmbeddingJob) -> Result<Embedded, ApiError> {
    let dim = setup.model.config.hidden_size;
    let mut out = Embedded { vectors: Vec::with_capacity(job.texts.len()), tokens: 0 };
    for chunk in job.texts.chunks(BATCH) {
        // No one waits for the rest (the route answered 504, or the client left).
        if job.reply.is_closed() || Instant::now() >= job.deadline {
            return Err(ApiError::unavailable("the request ended before its inputs were embedded"));
        }
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let batch = setup.model.tokenize(&refs).map_err(|e| ApiError::bad_request(e.to_string()))?;
        out.tokens += batch.ids.iter().map(Vec::len).sum::<usize>();
        let vectors = setup
            .encoder
            .embed(&mut setup.ctx, &batch)
            .map_err(|e| ApiError::internal(format!("the embedding model failed: {e}")))?;
        out.vectors.extend(vectors.chunks(dim).map(<[f32]>::to_vec));
    }
    Ok(out)
}
