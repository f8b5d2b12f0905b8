//! The HTTP routes: each checks the key, reads the body under the size and
//! time limits, parses and checks it, hands a job to the engine and turns
//! the engine's events into a reply or a stream of server-sent events.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::mpsc::TrySendError;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::embeddings::{EmbeddingJob, MAX_INPUTS};
use crate::error::ApiError;
use crate::job::{Event, FinishReason, Job, Usage};
use crate::metrics::Metrics;
use crate::requests::{ChatRequest, CompletionRequest, Prompt, ResponseFormat, SamplingFields, parse};
use crate::responses::{Endpoint, ReplyHeader, chat_logprobs, completion_logprobs};
use crate::state::{AppState, ServedDecoder};
use crate::token_choice::{GenerationParams, TokenLogprobs};
use crate::tools::{ToolReply, ToolUse, read_reply};

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/embeddings", post(embeddings))
        .fallback(|req: Request| async move { ApiError::not_found(req.uri().path()) })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .with_state(state)
}

/// The outcome of a route: a reply, or an error counted as failed.
type Reply = Result<Response, ApiError>;

fn counted(state: &AppState, reply: Reply) -> Response {
    match reply {
        Ok(r) => r,
        Err(e) => {
            Metrics::add(&state.metrics.requests_failed, 1);
            e.into_response()
        }
    }
}

/// `Authorization: Bearer KEY` when the server has a key.
fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &state.options.api_key else { return Ok(()) };
    // The scheme's name is case-insensitive (RFC 9110 §11.1): `bearer KEY` too.
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .and_then(|(scheme, key)| scheme.eq_ignore_ascii_case("bearer").then_some(key));
    // Compared in time independent of where they differ.
    match given {
        Some(g) if g.len() == key.len() && g.bytes().zip(key.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0 => {
            Ok(())
        }
        _ => Err(ApiError::unauthorized()),
    }
}

/// The body, at most `--max-body` bytes, arriving within the header timeout.
async fn read_body(state: &AppState, body: Body) -> Result<Vec<u8>, ApiError> {
    let limit = state.options.max_body;
    // A declared length past the limit is still read up to the limit before
    // the 413: answered at once, the connection closed under a client still
    // sending, which then sees a broken pipe instead of the answer.
    let wait = state.options.header_timeout;
    match tokio::time::timeout(wait, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(ApiError::body_timeout(wait.as_secs_f64())),
        Ok(Err(e)) if past_limit(&e) => Err(ApiError::body_too_large(limit)),
        // A malformed chunked encoding, a connection cut mid-body: the
        // client's request is at fault, not its size.
        Ok(Err(e)) => Err(ApiError::bad_request(format!("the request body could not be read: {e}"))),
        Ok(Ok(bytes)) => Ok(bytes.to_vec()),
    }
}

/// Whether reading a body failed because it passed `--max-body`.
fn past_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    match state.check_open().and_then(|()| state.check_decoder_whole()) {
        Ok(()) => Json(json!({"status": "ok"})).into_response(),
        Err(e) => e.into_response(),
    }
}

use axum::Json;

async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&state, &headers) {
        return e.into_response();
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render()).into_response()
}

async fn models(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&state, &headers) {
        return e.into_response();
    }
    let created = 0;
    let data: Vec<Value> = state
        .model_names()
        .into_iter()
        .map(|id| json!({"id": id, "object": "model", "created": created, "owned_by": "gantry"}))
        .collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

async fn chat(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let reply = chat_inner(&state, &headers, body).await;
    counted(&state, reply)
}

async fn chat_inner(state: &Arc<AppState>, headers: &HeaderMap, body: Body) -> Reply {
    authorize(state, headers)?;
    let arrived = Instant::now();
    let body = read_body(state, body).await?;
    let request: ChatRequest = parse(&body)?;
    let decoder = state.decoder_for(request.sampling.model.as_deref())?;
    let params = request.sampling.params(state.options.max_tokens, request.logprobs()?)?;
    let mut messages = request.messages()?;
    let tools = crate::tools::parse(request.tools.as_ref(), request.tool_choice.as_ref())?;
    if let Some(t) = &tools {
        if request.sampling.response_format()? != ResponseFormat::Text {
            return Err(ApiError::bad_request("`tools` and `response_format` cannot be used together"));
        }
        t.instruct(&mut messages);
    }
    if decoder.template.is_none() {
        return Err(ApiError::bad_request(
            "this model has no chat template (tokenizer.chat_template); use /v1/completions",
        ));
    }
    let prompt = off_the_runtime(state, arrived, move |decoder| {
        let template = decoder.template.as_ref().ok_or_else(|| ApiError::internal("the chat template went away"))?;
        let text =
            template.render(&messages, true).map_err(|e| ApiError::bad_request(format!("the chat template: {e}")))?;
        let tok = &decoder.tokenizer;
        // A template that writes the BOS itself gets none added.
        let bos_text = tok.bos().and_then(|id| tok.token(id).ok()).map(|t| t.text.as_str());
        let add_bos = !bos_text.is_some_and(|b| !b.is_empty() && text.starts_with(b));
        tok.encode(&text, add_bos, true).map_err(|e| ApiError::bad_request(format!("tokenizing: {e}")))
    })
    .await?;
    generate(state, Endpoint::Chat, arrived, prompt, params, &request.sampling, tools).await
}

async fn completions(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let reply = completions_inner(&state, &headers, body).await;
    counted(&state, reply)
}

async fn completions_inner(state: &Arc<AppState>, headers: &HeaderMap, body: Body) -> Reply {
    authorize(state, headers)?;
    let arrived = Instant::now();
    let body = read_body(state, body).await?;
    let request: CompletionRequest = parse(&body)?;
    let decoder = state.decoder_for(request.sampling.model.as_deref())?;
    request.check_unsupported()?;
    let params = request.sampling.params(state.options.max_tokens, request.logprobs()?)?;
    let prompt = match request.prompt()? {
        Prompt::Text(text) => {
            off_the_runtime(state, arrived, move |decoder| {
                decoder
                    .tokenizer
                    .encode(&text, true, true)
                    .map_err(|e| ApiError::bad_request(format!("tokenizing: {e}")))
            })
            .await?
        }
        Prompt::Tokens(ids) => {
            let n_vocab = decoder.tokenizer.n_vocab();
            if let Some(bad) = ids.iter().find(|&&t| t as usize >= n_vocab) {
                return Err(ApiError::bad_request(format!(
                    "`prompt` has token id {bad}; the vocabulary has {n_vocab} tokens"
                )));
            }
            ids
        }
    };
    generate(state, Endpoint::Completion, arrived, prompt, params, &request.sampling, None).await
}

/// Queues the job and answers: the whole reply, or a stream.
async fn generate(
    state: &Arc<AppState>,
    endpoint: Endpoint,
    arrived: Instant,
    prompt: Vec<u32>,
    params: GenerationParams,
    sampling: &SamplingFields,
    tools: Option<ToolUse>,
) -> Reply {
    // The one decoder: the caller has checked the request names it.
    let decoder = state.decoder.get().ok_or_else(|| ApiError::unavailable("the model is loading"))?;
    if prompt.is_empty() {
        return Err(ApiError::bad_request("the prompt has no tokens"));
    }
    if prompt.len() >= decoder.seq_ctx {
        return Err(ApiError::bad_request_code(
            "context_length_exceeded",
            format!(
                "the prompt has {} tokens; this server's context holds {} tokens per sequence (prompt and reply: \
                 --ctx-size / --parallel)",
                prompt.len(),
                decoder.seq_ctx
            ),
        ));
    }
    let format = match &tools {
        Some(t) => ResponseFormat::JsonSchema(t.schema()),
        None => sampling.response_format()?,
    };
    let constraint = match format {
        ResponseFormat::Text => None,
        // The grammar decides where a constrained reply ends: a stop string
        // would cut its JSON and still report a whole reply.
        ResponseFormat::JsonSchema(_) if !params.stop.is_empty() => {
            let what = if tools.is_some() { "`tools`" } else { "`response_format`" };
            return Err(ApiError::bad_request(format!(
                "`stop` cannot be combined with {what}: the reply is a JSON value that ends where its grammar \
                 completes it, and a stop string would cut it partway"
            )));
        }
        ResponseFormat::JsonSchema(schema) => {
            if decoder.grammar.is_none() {
                return Err(ApiError::bad_request(
                    "`response_format`: constrained decoding is not available for this model",
                ));
            }
            let what = if tools.is_some() { "`tools`" } else { "`response_format`" };
            Some(
                off_the_runtime(state, arrived, move |decoder| {
                    let vocab = decoder.grammar.as_ref().ok_or_else(|| ApiError::internal("the grammar went away"))?;
                    gantry::model::grammar::Constraint::json_schema(vocab, &schema)
                        .map_err(|e| ApiError::bad_request(format!("{what}: {}", e.detail())))
                })
                .await?,
            )
        }
    };
    let timeout = state.options.request_timeout;
    let (events, receiver) = unbounded_channel();
    let wants_logprobs = params.logprobs.is_some();
    let job = Job { prompt, params, constraint, events, arrived, deadline: arrived + timeout };
    Metrics::add(&state.metrics.queue_length, 1);
    if let Err(e) = decoder.jobs.try_send(job) {
        Metrics::sub_queue(&state.metrics);
        return Err(match e {
            TrySendError::Full(_) => ApiError::queue_full(state.options.queue),
            TrySendError::Disconnected(_) => ApiError::unavailable("the engine has stopped"),
        });
    }
    let header = ReplyHeader::new(endpoint, &decoder.name, state.next_serial());
    let tokenizer = decoder.tokenizer.clone();
    if tools.is_some() {
        // The call is known once the reply is whole: it is sent in one piece, streamed or not.
        let reply = collect(receiver, arrived, timeout).await?;
        return Ok(tool_reply(&header, reply, sampling.stream));
    }
    if sampling.stream {
        let stream =
            sse_stream(header, receiver, tokenizer, wants_logprobs, sampling.include_usage(), state.metrics.clone());
        return Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response());
    }
    let reply = collect(receiver, arrived, timeout).await?;
    let logprobs = wants_logprobs.then(|| match header.endpoint {
        Endpoint::Chat => chat_logprobs(&tokenizer, &reply.logprobs),
        Endpoint::Completion => completion_logprobs(&tokenizer, &reply.logprobs, 0),
    });
    Ok(Json(header.complete(&reply.text, logprobs, reply.finish, reply.usage)).into_response())
}

/// A whole reply.
struct Collected {
    text: String,
    logprobs: Vec<TokenLogprobs>,
    finish: FinishReason,
    usage: Usage,
}

/// Runs `work` on the decoder served: a template render, a tokenization or a
/// grammar compile, CPU-bound and bounded (the template's fuel, the body's
/// size) but possibly seconds long. It runs on tokio's blocking threads, so
/// that it never holds one of the two HTTP workers (`/health` and every
/// other request stay answered), at most one per core at once (the others
/// wait their turn), and the request that `arrived` waits for it until its
/// `--timeout` runs out: past that it is answered 504 while the work runs
/// out.
async fn off_the_runtime<T: Send + 'static>(
    state: &Arc<AppState>,
    arrived: Instant,
    work: impl FnOnce(&ServedDecoder) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let timeout = state.options.request_timeout;
    let deadline = tokio::time::Instant::from_std(arrived) + timeout;
    // A preparation's turn (one per core at once), waited for within the timeout.
    let permit = match tokio::time::timeout_at(deadline, Arc::clone(&state.preparing).acquire_owned()).await {
        Ok(Ok(permit)) => permit,
        Ok(Err(_)) => return Err(ApiError::unavailable("the server is shutting down")),
        Err(_) => return Err(ApiError::timed_out(timeout.as_secs_f64())),
    };
    let shared = Arc::clone(state);
    let task = tokio::task::spawn_blocking(move || {
        // Held until the work ends, even once its request has timed out.
        let _permit = permit;
        let decoder = shared.decoder.get().ok_or_else(|| ApiError::unavailable("the model is loading"))?;
        work(decoder)
    });
    match tokio::time::timeout_at(deadline, task).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => Err(ApiError::internal(format!("preparing the request failed: {e}"))),
        Err(_) => Err(ApiError::timed_out(timeout.as_secs_f64())),
    }
}

/// Waits for the whole reply.
async fn collect(
    mut events: UnboundedReceiver<Event>,
    arrived: Instant,
    timeout: Duration,
) -> Result<Collected, ApiError> {
    let mut text = String::new();
    let mut logprobs: Vec<TokenLogprobs> = Vec::new();
    // The engine ends a job at its deadline; this is the backstop.
    let deadline = tokio::time::Instant::from_std(arrived) + timeout + Duration::from_secs(5);
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .map_err(|_| ApiError::timed_out(timeout.as_secs_f64()))?
            .ok_or_else(|| ApiError::internal("the engine dropped this request"))?;
        match event {
            Event::Token { text: t, logprobs: lp } => {
                text.push_str(&t);
                logprobs.extend(lp);
            }
            Event::Text(t) => text.push_str(&t),
            Event::Done { finish, usage } => return Ok(Collected { text, logprobs, finish, usage }),
            Event::Failed(e) => return Err(e),
        }
    }
}

/// The reply of a chat with tools: a call, or words (or, cut short, the raw text).
fn tool_reply(header: &ReplyHeader, reply: Collected, stream: bool) -> Response {
    let (text, finish) = match read_reply(&reply.text) {
        Some(ToolReply::Call { name, arguments }) => {
            if !stream {
                return Json(header.complete_tool_call(&name, &arguments, reply.usage)).into_response();
            }
            let chunks = header.tool_call_chunks(&name, &arguments, reply.usage);
            return sse_of(chunks.into_iter().collect());
        }
        Some(ToolReply::Text(t)) => (t, reply.finish),
        None => (reply.text, reply.finish),
    };
    if !stream {
        return Json(header.complete(&text, None, finish, reply.usage)).into_response();
    }
    sse_of(vec![
        header.chunk(Some(&text), true, None, None),
        header.chunk(None, false, None, Some((finish, reply.usage))),
    ])
}

/// A stream of these chunks, then `[DONE]`.
fn sse_of(chunks: Vec<Value>) -> Response {
    let events = chunks
        .into_iter()
        .map(|c| SseEvent::default().data(c.to_string()))
        .chain(std::iter::once(SseEvent::default().data("[DONE]")))
        .map(Ok::<_, Infallible>);
    Sse::new(futures_util::stream::iter(events)).into_response()
}

/// The events of a streamed request as server-sent events, ending with
/// `data: [DONE]` (or an error object, then `[DONE]`). The stream owns the
/// receiver: a client that disconnects drops it, and the engine stops the job.
fn sse_stream(
    header: ReplyHeader,
    events: UnboundedReceiver<Event>,
    tokenizer: Arc<gantry::model::tokenizer::Tokenizer>,
    wants_logprobs: bool,
    include_usage: bool,
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    struct Progress {
        events: UnboundedReceiver<Event>,
        first: bool,
        /// Bytes of text sent (completions' `text_offset`).
        sent: usize,
        /// Events still to send before reading the next (usage chunk, `[DONE]`).
        tail: Vec<SseEvent>,
        done: bool,
    }
    let start = Progress { events, first: true, sent: 0, tail: Vec::new(), done: false };
    futures_util::stream::unfold(start, move |mut p| {
        let header = header.clone();
        let tokenizer = tokenizer.clone();
        let metrics = metrics.clone();
        async move {
            if let Some(e) = p.tail.pop() {
                return Some((Ok(e), p));
            }
            if p.done {
                return None;
            }
            let data = |v: Value| SseEvent::default().data(v.to_string());
            let done_event = SseEvent::default().data("[DONE]");
            let event = match p.events.recv().await {
                None => {
                    p.done = true;
                    p.tail.push(done_event);
                    Metrics::add(&metrics.requests_failed, 1);
                    data(ApiError::internal("the engine dropped this request").body())
                }
                Some(Event::Token { text, logprobs }) => {
                    let lp = if wants_logprobs {
                        let list = logprobs.as_slice();
                        Some(match header.endpoint {
                            Endpoint::Chat => chat_logprobs(&tokenizer, list),
                            Endpoint::Completion => completion_logprobs(&tokenizer, list, p.sent),
                        })
                    } else {
                        None
                    };
                    p.sent += text.len();
                    let chunk = header.chunk(Some(&text), p.first, lp, None);
                    p.first = false;
                    data(chunk)
                }
                Some(Event::Text(text)) => {
                    p.sent += text.len();
                    let chunk = header.chunk(Some(&text), p.first, None, None);
                    p.first = false;
                    data(chunk)
                }
                Some(Event::Done { finish, usage }) => {
                    p.done = true;
                    p.tail.push(done_event);
                    if include_usage {
                        p.tail.push(data(header.usage_chunk(usage)));
                    }
                    let chunk = header.chunk(None, p.first, None, Some((finish, usage)));
                    data(chunk)
                }
                Some(Event::Failed(e)) => {
                    p.done = true;
                    p.tail.push(done_event);
                    Metrics::add(&metrics.requests_failed, 1);
                    data(e.body())
                }
            };
            Some((Ok(event), p))
        }
    })
}

async fn embeddings(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let reply = embeddings_inner(&state, &headers, body).await;
    counted(&state, reply)
}

async fn embeddings_inner(state: &Arc<AppState>, headers: &HeaderMap, body: Body) -> Reply {
    authorize(state, headers)?;
    let body = read_body(state, body).await?;
    let request: Value = parse(&body)?;
    let embedder = state.embedder_for(request.get("model").and_then(Value::as_str))?;
    let texts: Vec<String> = match request.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) if !items.is_empty() => {
            items.iter().map(|i| i.as_str().map(str::to_owned)).collect::<Option<_>>().ok_or_else(|| {
                ApiError::bad_request(
                    "`input` must be a string or a list of strings (token ids are not taken: the model tokenizes)",
                )
            })?
        }
        _ => return Err(ApiError::bad_request("`input` must be a string or a non-empty list of strings")),
    };
    if texts.len() > MAX_INPUTS {
        return Err(ApiError::bad_request(format!("`input` has {} items; at most {MAX_INPUTS}", texts.len())));
    }
    let base64 = match request.get("encoding_format").and_then(Value::as_str) {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => return Err(ApiError::bad_request(format!("`encoding_format` {other:?}: float or base64"))),
    };
    if request.get("dimensions").is_some_and(|d| !d.is_null()) {
        return Err(ApiError::bad_request("`dimensions` is not supported: this model's vectors have a fixed size"));
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    Metrics::add(&state.metrics.queue_length, 1);
    let timeout = state.options.request_timeout;
    let deadline = Instant::now() + timeout;
    // Dropped when this route ends, whichever way: the thread then stops.
    let waiting = Arc::new(());
    let waiter = Arc::downgrade(&waiting);
    if let Err(e) = embedder.jobs.try_send(EmbeddingJob { texts, reply, deadline, timeout, waiter }) {
        Metrics::sub_queue(&state.metrics);
        return Err(match e {
            TrySendError::Full(_) => ApiError::queue_full(state.options.queue),
            TrySendError::Disconnected(_) => ApiError::unavailable("the embedding thread has stopped"),
        });
    }
    let embedded = tokio::time::timeout(timeout, answer)
        .await
        .map_err(|_| ApiError::timed_out(timeout.as_secs_f64()))?
        .map_err(|_| ApiError::internal("the embedding thread dropped this request"))??;
    let data: Vec<Value> = embedded
        .vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 { Value::String(base64_f32(v)) } else { json!(v) };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    let usage = Usage { prompt_tokens: embedded.tokens, ..Usage::default() };
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": embedder.name,
        "usage": {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.prompt_tokens},
    }))
    .into_response())
}

/// Little-endian f32 bytes in standard base64, as OpenAI's `encoding_format: base64`.
fn base64_f32(v: &[f32]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    #[test]
    fn base64_is_little_endian_f32() {
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
    }

    #[test]
    fn keys_are_checked_whole() {
        let options = crate::ServeOptions { api_key: Some("secret".into()), ..Default::default() };
        let state = AppState::new(options);
        let mut headers = HeaderMap::new();
        assert_eq!(authorize(&state, &headers).expect_err("no key").status, StatusCode::UNAUTHORIZED);
        headers.insert(header::AUTHORIZATION, "Bearer secre".parse().expect("header"));
        assert!(authorize(&state, &headers).is_err());
        headers.insert(header::AUTHORIZATION, "Bearer secret".parse().expect("header"));
        assert!(authorize(&state, &headers).is_ok());
    }
}
