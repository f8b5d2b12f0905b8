//! `gantry serve`: an OpenAI-compatible HTTP server over a Gantry decoder
//! (and optionally a BERT embedding model).
//!
//! - `POST /v1/chat/completions` (the model's chat template) and
//!   `POST /v1/completions` (text or token ids), whole or streamed as
//!   server-sent events, with OpenAI's sampling fields, stop strings,
//!   log-probabilities and usage;
//! - `POST /v1/embeddings`, `GET /v1/models`, `GET /health` (503 while
//!   loading), `GET /metrics` (Prometheus text).
//!
//! One engine thread runs continuous batching over the decoder's paged KV
//! cache: every step's batch holds each running sequence's next token and
//! chunks of new prompts (see [`engine`]); a slot that finishes keeps its
//! cells so that the next request sharing its prefix skips that part.
//! Errors are OpenAI-shaped JSON with the status a client acts on (see
//! [`error::ApiError`]).
//!
//! ```no_run
//! # fn load() -> gantry::Result<gantry_serve::Loaded> { unimplemented!() }
//! let options = gantry_serve::ServeOptions::default();
//! gantry_serve::serve(options, load)?; // until SIGINT or SIGTERM
//! # Ok::<(), gantry_serve::ServeError>(())
//! ```

pub mod embeddings;
pub mod engine;
pub mod error;
mod http;
pub mod job;
pub mod metrics;
mod options;
pub mod requests;
pub mod responses;
mod routes;
pub mod state;
pub mod stop_strings;
pub mod token_choice;
pub mod tools;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gantry::Context;
use gantry::model::chat_template::ChatTemplate;
use gantry::model::decoder::Session;
use gantry::model::tokenizer::Tokenizer;

pub use embeddings::EmbedderSetup;
pub use options::ServeOptions;
use state::{AppState, ServedDecoder, ServedEmbedder};

/// A loaded decoder: what the engine thread owns.
pub struct DecoderSetup {
    /// Its context (weights, KV cache, compute memory).
    pub ctx: Context,
    /// A session whose KV cache holds the slots' sequences (`n_ctx` =
    /// `parallel` × tokens per sequence).
    pub session: Session,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
    /// Its chat template (`None`: only `/v1/completions`).
    pub template: Option<ChatTemplate>,
    /// The name `/v1/models` lists and requests ask for.
    pub name: String,
}

/// What the load function gives the server.
#[derive(Default)]
pub struct Loaded {
    /// The decoder for the completion routes.
    pub decoder: Option<DecoderSetup>,
    /// The embedding model for `/v1/embeddings`.
    pub embedder: Option<EmbedderSetup>,
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A setting is out of range.
    #[error("{0}")]
    Options(String),
    /// The address could not be bound, or the runtime not started.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// Loading the model failed.
    #[error("loading the model: {0}")]
    Load(gantry::Error),
}

/// Serves until SIGINT or SIGTERM, then stops taking requests and lets the
/// running ones finish (within `shutdown_grace`). `load` runs on a thread
/// of its own while the server already answers (`/health` says 503 until
/// it returns).
pub fn serve<F>(options: ServeOptions, load: F) -> Result<(), ServeError>
where
    F: FnOnce() -> gantry::Result<Loaded> + Send + 'static,
{
    serve_until(options, load, |_| {}, || {}, shutdown_signal())
}

/// [`serve`] until `stop` completes instead of a signal; `on_listen` is
/// told the bound address (the port, when `options.addr` asked for 0), and
/// `on_ready` is called once the loaded model answers (`/health` says 200).
pub fn serve_until<F>(
    options: ServeOptions,
    load: F,
    on_listen: impl FnOnce(std::net::SocketAddr),
    on_ready: impl FnOnce() + Send + 'static,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError>
where
    F: FnOnce() -> gantry::Result<Loaded> + Send + 'static,
{
    check(&options)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("gantry-http")
        .enable_all()
        .build()
        .map_err(|source| ServeError::Io { context: "starting the HTTP runtime".into(), source })?;
    let state = Arc::new(AppState::new(options.clone()));
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(options.addr))
        .map_err(|source| ServeError::Io { context: format!("listening on {}", options.addr), source })?;
    let addr =
        listener.local_addr().map_err(|source| ServeError::Io { context: "the bound address".into(), source })?;
    on_listen(addr);

    // Loading runs beside the server; a failure stops it.
    let load_error: Arc<Mutex<Option<gantry::Error>>> = Arc::default();
    let load_failed = Arc::new(tokio::sync::Notify::new());
    let workers: Arc<Mutex<Vec<std::thread::JoinHandle<()>>>> = Arc::default();
    {
        let state = state.clone();
        let load_error = load_error.clone();
        let load_failed = load_failed.clone();
        let workers = workers.clone();
        std::thread::Builder::new()
            .name("gantry-load".into())
            .spawn(move || match load_catching_panics(load) {
                Ok(loaded) => {
                    let threads = install(&state, loaded);
                    workers.lock().unwrap_or_else(|e| e.into_inner()).extend(threads);
                    state.ready.store(true, Ordering::SeqCst);
                    tracing::info!("ready");
                    on_ready();
                }
                Err(e) => {
                    *load_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    load_failed.notify_one();
                }
            })
            .map_err(|source| ServeError::Io { context: "starting the loading thread".into(), source })?;
    }

    let router = routes::router(state.clone());
    let draining = state.draining.clone();
    let stop = async move {
        tokio::select! {
            () = stop => {}
            () = load_failed.notified() => {}
        }
        draining.store(true, Ordering::SeqCst);
    };
    let drain = options.shutdown_grace + Duration::from_secs(5);
    runtime.block_on(http::accept_loop(listener, router, options.max_connections, options.header_timeout, drain, stop));
    // The engine ends once its running requests finish (or the grace ends them).
    let threads = std::mem::take(&mut *workers.lock().unwrap_or_else(|e| e.into_inner()));
    for t in threads {
        let _ = t.join();
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
    match load_error.lock().unwrap_or_else(|e| e.into_inner()).take() {
        Some(e) => Err(ServeError::Load(e)),
        None => Ok(()),
    }
}

/// Starts the engine and embedding threads for what loaded and publishes
/// them to the routes.
fn install(state: &Arc<AppState>, loaded: Loaded) -> Vec<std::thread::JoinHandle<()>> {
    let mut threads = Vec::new();
    let options = &state.options;
    if let Some(d) = loaded.decoder {
        let seq_ctx = d.session.n_ctx() / options.parallel;
        let settings = engine::EngineSettings {
            parallel: options.parallel,
            batch_size: options.batch_size,
            seq_ctx,
            cache_reuse: options.cache_reuse,
            shutdown_grace: options.shutdown_grace,
        };
        let tokenizer = Arc::new(d.tokenizer);
        let grammar = match gantry::model::grammar::GrammarVocab::new(tokenizer.clone()) {
            Ok(g) => Some(g),
            Err(e) => {
                tracing::warn!(error = %e, "no constrained decoding: response_format will be refused");
                None
            }
        };
        let (jobs, incoming) = std::sync::mpsc::sync_channel(options.queue);
        let engine = engine::Engine::new(
            d.ctx,
            d.session,
            tokenizer.clone(),
            settings,
            state.metrics.clone(),
            state.decoder_lost.clone(),
        );
        let draining = state.draining.clone();
        match std::thread::Builder::new().name("gantry-engine".into()).spawn(move || engine.run(incoming, draining)) {
            Ok(t) => threads.push(t),
            Err(e) => tracing::error!(error = %e, "could not start the engine thread"),
        }
        let _ =
            state.decoder.set(ServedDecoder { name: d.name, tokenizer, template: d.template, seq_ctx, grammar, jobs });
    }
    if let Some(e) = loaded.embedder {
        let (jobs, incoming) = std::sync::mpsc::sync_channel(options.queue);
        let name = e.name.clone();
        let metrics = state.metrics.clone();
        let draining = state.draining.clone();
        match std::thread::Builder::new()
            .name("gantry-embed".into())
            .spawn(move || embeddings::run(e, incoming, metrics, draining))
        {
            Ok(t) => threads.push(t),
            Err(e) => tracing::error!(error = %e, "could not start the embedding thread"),
        }
        let _ = state.embedder.set(ServedEmbedder { name, jobs });
    }
    threads
}

/// `load()`, a panic in it an error: the server then stops with the error
/// instead of answering "loading" for ever.
fn load_catching_panics<L: FnOnce() -> gantry::Result<Loaded>>(load: L) -> gantry::Result<Loaded> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(load)).unwrap_or_else(|panic| {
        let message = gantry::model::caught_panic::message(&*panic);
        Err(gantry::Error::Model(format!("loading failed: a panic ({message})")))
    })
}

/// Settings a server cannot run with.
fn check(o: &ServeOptions) -> Result<(), ServeError> {
    let bad = |m: String| Err(ServeError::Options(m));
    let most = gantry::model::decoder::MAX_PARALLEL_SEQUENCES;
    if o.parallel == 0 || o.parallel > most {
        return bad(format!("--parallel {}: between 1 and {most} sequences", o.parallel));
    }
    if o.batch_size < o.parallel {
        return bad(format!(
            "--batch-size {} is smaller than --parallel {}: every running sequence needs its token in each step",
            o.batch_size, o.parallel
        ));
    }
    if o.queue == 0 {
        return bad("--queue 0: at least one request must be able to wait".into());
    }
    if o.max_tokens == 0 {
        return bad("--max-tokens 0: a reply needs at least one token".into());
    }
    if let Some(key) = o.api_key.as_deref() {
        if key.is_empty() {
            return bad("--api-key is empty".into());
        }
        // What a client can send in an `Authorization` header: HTTP drops
        // a value's surrounding whitespace, and other bytes are not text.
        if key.trim() != key || !key.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
            return bad(
                "--api-key must be visible ASCII (spaces only inside): no client could send this key in a header"
                    .into(),
            );
        }
    }
    Ok(())
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("SIGINT: finishing the running requests"),
        () = terminate => tracing::info!("SIGTERM: finishing the running requests"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_key_no_client_can_send_is_refused_at_start() {
        for key in ["abc ", " abc", "abc\t", "ключ", "abc\u{1}"] {
            let options = ServeOptions { api_key: Some(key.into()), ..ServeOptions::default() };
            let e = check(&options).unwrap_err().to_string();
            assert!(e.contains("--api-key must be visible ASCII"), "{key:?}: {e}");
        }
        check(&ServeOptions { api_key: Some("sk-a b_c".into()), ..ServeOptions::default() }).unwrap();
    }

    /// A load that panics stops the server with an error naming the panic;
    /// it had left the server answering "loading" for ever.
    #[test]
    fn a_panic_while_loading_stops_the_server_with_an_error() {
        let options = ServeOptions { addr: "127.0.0.1:0".parse().unwrap(), ..ServeOptions::default() };
        let started = std::time::Instant::now();
        let result = serve_until(options, || panic!("a template probe failed"), |_| {}, || {}, std::future::pending());
        let e = result.unwrap_err().to_string();
        assert!(e.contains("a panic (a template probe failed)"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    }
}
