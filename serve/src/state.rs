//! What the routes share: the options, the metrics, and — once loaded —
//! the model's tokenizer, chat template and the engine's queue.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, OnceLock};

use gantry::model::chat_template::ChatTemplate;
use gantry::model::grammar::GrammarVocab;
use gantry::model::tokenizer::Tokenizer;

use crate::ServeOptions;
use crate::embeddings::EmbeddingJob;
use crate::error::ApiError;
use crate::job::Job;
use crate::metrics::Metrics;

/// A decoder being served.
pub struct ServedDecoder {
    /// The name requests ask for.
    pub name: String,
    /// Its tokenizer (the routes tokenize; the engine decodes pieces).
    pub tokenizer: Arc<Tokenizer>,
    /// Its chat template, when the file (or `--chat-template`) has one.
    pub template: Option<ChatTemplate>,
    /// Tokens one sequence holds, prompt and reply.
    pub seq_ctx: usize,
    /// The vocabulary for constrained replies (`None`: it could not be built; the
    /// log says why, and `response_format` is refused).
    pub grammar: Option<GrammarVocab>,
    /// The engine's queue.
    pub jobs: SyncSender<Job>,
}

/// An embedding model being served.
pub struct ServedEmbedder {
    /// The name requests ask for.
    pub name: String,
    /// Its thread's queue.
    pub jobs: SyncSender<EmbeddingJob>,
}

/// The routes' shared state.
pub struct AppState {
    /// The server's settings.
    pub options: ServeOptions,
    /// Counters and histograms.
    pub metrics: Arc<Metrics>,
    /// Set once the decoder has loaded.
    pub decoder: OnceLock<ServedDecoder>,
    /// Set once the embedding model has loaded.
    pub embedder: OnceLock<ServedEmbedder>,
    /// Set when loading is over (whatever was asked has loaded).
    pub ready: AtomicBool,
    /// Set on SIGINT/SIGTERM: new requests are refused, running ones finish.
    pub draining: Arc<AtomicBool>,
    /// Set (to the error) when a batch failed because a device of the text
    /// model was lost (a remote server gone, a GPU reset): what lived there,
    /// its layers and cache, is gone, so no later request could succeed.
    pub decoder_lost: Arc<OnceLock<String>>,
    /// Makes reply ids unique.
    pub serial: AtomicU64,
    /// Requests' preparations (template renders, tokenizations, grammar
    /// compiles) that may run at once: one per core, so that many requests
    /// with large schemas wait (within their `--timeout`) instead of each
    /// taking a thread and its memory.
    pub preparing: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// A state for `options`, nothing loaded yet.
    pub fn new(options: ServeOptions) -> Self {
        Self {
            options,
            metrics: Arc::new(Metrics::default()),
            decoder: OnceLock::new(),
            embedder: OnceLock::new(),
            ready: AtomicBool::new(false),
            draining: Arc::new(AtomicBool::new(false)),
            decoder_lost: Arc::new(OnceLock::new()),
            serial: AtomicU64::new(0),
            preparing: Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            )),
        }
    }

    /// The next reply serial.
    pub fn next_serial(&self) -> u64 {
        self.serial.fetch_add(1, Ordering::Relaxed)
    }

    /// 503 while loading or shutting down.
    pub fn check_open(&self) -> Result<(), ApiError> {
        if self.draining.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable("the server is shutting down"));
        }
        if !self.ready.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable("the model is loading"));
        }
        Ok(())
    }

    /// 503 once the text model lost a device (see [`AppState::decoder_lost`]):
    /// a load balancer polling `/health` moves traffic elsewhere, and a
    /// supervisor restarts the server, rather than every request getting 500.
    pub fn check_decoder_whole(&self) -> Result<(), ApiError> {
        match self.decoder_lost.get() {
            Some(e) => Err(ApiError::unavailable(format!(
                "the text generation model lost a device and must be loaded again (restart the server): {e}"
            ))),
            None => Ok(()),
        }
    }

    /// The names of the models served.
    pub fn model_names(&self) -> Vec<&str> {
        let mut names = Vec::new();
        if let Some(d) = self.decoder.get() {
            names.push(d.name.as_str());
        }
        if let Some(e) = self.embedder.get() {
            names.push(e.name.as_str());
        }
        names
    }

    /// The decoder, when `requested` names it (or names nothing).
    pub fn decoder_for(&self, requested: Option<&str>) -> Result<&ServedDecoder, ApiError> {
        self.check_open()?;
        self.check_decoder_whole()?;
        match self.decoder.get() {
            Some(d) if requested.is_none_or(|r| r == d.name) => Ok(d),
            Some(_) => Err(ApiError::model_not_found(requested.unwrap_or(""), &self.model_names())),
            None => Err(ApiError::no_model("text generation model", "--model FILE.gguf")),
        }
    }

    /// The embedding model, when `requested` names it (or names nothing).
    pub fn embedder_for(&self, requested: Option<&str>) -> Result<&ServedEmbedder, ApiError> {
        self.check_open()?;
        match self.embedder.get() {
            Some(e) if requested.is_none_or(|r| r == e.name) => Ok(e),
            Some(_) => Err(ApiError::model_not_found(requested.unwrap_or(""), &self.model_names())),
            None => Err(ApiError::no_model("embedding model", "--embedding-model DIR")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Once the text model lost a device, `/health` and generation answer 503
    /// naming the loss (every request had got 500 while `/health` said ok).
    #[test]
    fn a_lost_device_makes_the_decoder_unavailable() {
        let state = AppState::new(ServeOptions::default());
        state.ready.store(true, Ordering::SeqCst);
        state.check_decoder_whole().unwrap();
        state.decoder_lost.set("backend remote 127.0.0.1:1: connection lost".into()).unwrap();
        let e = state.check_decoder_whole().unwrap_err();
        assert_eq!(e.status, axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.message.contains("lost a device") && e.message.contains("connection lost"), "{}", e.message);
        let Err(e) = state.decoder_for(None) else { panic!("the decoder was given out") };
        assert_eq!(e.status, axum::http::StatusCode::SERVICE_UNAVAILABLE);
    }
}
