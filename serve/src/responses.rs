//! The JSON OpenAI's clients read back: completions, chat completions,
//! their streamed chunks, usage and log-probabilities.

use gantry::model::tokenizer::Tokenizer;
use serde_json::{Value, json};

use crate::job::{FinishReason, Usage};
use crate::token_choice::TokenLogprobs;

/// Which endpoint a reply belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completion,
}

/// What every reply of one request repeats: its id, creation time and model.
#[derive(Debug, Clone)]
pub struct ReplyHeader {
    /// `chatcmpl-…` or `cmpl-…`.
    pub id: String,
    /// Seconds since the epoch.
    pub created: u64,
    /// The model's name.
    pub model: String,
    /// The endpoint.
    pub endpoint: Endpoint,
}

impl ReplyHeader {
    /// A header for a new request (`serial` makes the id unique).
    pub fn new(endpoint: Endpoint, model: &str, serial: u64) -> Self {
        let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let prefix = match endpoint {
            Endpoint::Chat => "chatcmpl",
            Endpoint::Completion => "cmpl",
        };
        Self { id: format!("{prefix}-{created:x}{serial:08x}"), created, model: model.to_owned(), endpoint }
    }

    /// A reply object: its id, `object`, creation time and model, with `body`'s fields.
    fn envelope(&self, chunk: bool, body: Value) -> Value {
        let mut v = json!({"id": self.id, "object": self.object(chunk), "created": self.created, "model": self.model});
        if let (Some(v), Value::Object(fields)) = (v.as_object_mut(), body) {
            v.extend(fields);
        }
        v
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.endpoint, chunk) {
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
            (Endpoint::Completion, _) => "text_completion",
        }
    }

    /// The whole reply of a request that was not streamed.
    pub fn complete(&self, text: &str, logprobs: Option<Value>, finish: FinishReason, usage: Usage) -> Value {
        let choice = match self.endpoint {
            Endpoint::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": logprobs,
                "finish_reason": finish.as_str(),
            }),
            Endpoint::Completion => json!({
                "index": 0,
                "text": text,
                "logprobs": logprobs,
                "finish_reason": finish.as_str(),
            }),
        };
        self.envelope(
            false,
            json!({
                "choices": [choice],
                "usage": usage_json(usage),
            }),
        )
    }

    /// The whole reply of a chat that called a tool (`finish_reason: "tool_calls"`).
    pub fn complete_tool_call(&self, name: &str, arguments: &str, usage: Usage) -> Value {
        self.envelope(false, json!({
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": null, "tool_calls": [self.tool_call(name, arguments, None)]},
                "logprobs": null,
                "finish_reason": "tool_calls",
            }],
            "usage": usage_json(usage),
        }))
    }

    /// The streamed chunks of a chat that called a tool: the call whole, then
    /// the end with its usage.
    pub fn tool_call_chunks(&self, name: &str, arguments: &str, usage: Usage) -> [Value; 2] {
        let base = |choice: Value| {
            self.envelope(
                true,
                json!({
                    "choices": [choice],
                }),
            )
        };
        let call = base(json!({
            "index": 0,
            "delta": {"role": "assistant", "content": null, "tool_calls": [self.tool_call(name, arguments, Some(0))]},
            "logprobs": null,
            "finish_reason": null,
        }));
        let mut end = base(json!({"index": 0, "delta": {}, "logprobs": null, "finish_reason": "tool_calls"}));
        end["usage"] = usage_json(usage);
        [call, end]
    }

    fn tool_call(&self, name: &str, arguments: &str, index: Option<usize>) -> Value {
        let mut call = json!({
            "id": format!("call_{}", &self.id[self.id.find('-').map_or(0, |i| i + 1)..]),
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        });
        if let Some(i) = index {
            call["index"] = i.into();
        }
        call
    }

    /// A streamed chunk: a piece of text (the first chat chunk also names
    /// the role), or the end (`finish` with its usage).
    pub fn chunk(
        &self,
        text: Option<&str>,
        first: bool,
        logprobs: Option<Value>,
        end: Option<(FinishReason, Usage)>,
    ) -> Value {
        let choice = match self.endpoint {
            Endpoint::Chat => {
                let mut delta = serde_json::Map::new();
                if first {
                    delta.insert("role".into(), "assistant".into());
                }
                if let Some(t) = text {
                    delta.insert("content".into(), t.into());
                }
                json!({
                    "index": 0,
                    "delta": delta,
                    "logprobs": logprobs,
                    "finish_reason": end.map(|(f, _)| f.as_str()),
                })
            }
            Endpoint::Completion => json!({
                "index": 0,
                "text": text.unwrap_or(""),
                "logprobs": logprobs,
                "finish_reason": end.map(|(f, _)| f.as_str()),
            }),
        };
        let mut chunk = self.envelope(
            true,
            json!({
                "choices": [choice],
            }),
        );
        if let Some((_, usage)) = end {
            chunk["usage"] = usage_json(usage);
        }
        chunk
    }

    /// The chunk of usage alone that `stream_options.include_usage` asks for.
    pub fn usage_chunk(&self, usage: Usage) -> Value {
        self.envelope(
            true,
            json!({
                "choices": [],
                "usage": usage_json(usage),
            }),
        )
    }
}

/// `usage`, with the reused prompt tokens as `prompt_tokens_details.cached_tokens`.
pub fn usage_json(u: Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    })
}

/// A token's text and bytes as the log-probability lists show them.
fn piece(tokenizer: &Tokenizer, token: u32) -> (String, Vec<u8>) {
    let bytes = tokenizer.token_to_piece(token, true).map(<[u8]>::to_vec).unwrap_or_default();
    (String::from_utf8_lossy(&bytes).into_owned(), bytes)
}

/// Chat's `logprobs.content` entries for `tokens`.
pub fn chat_logprobs(tokenizer: &Tokenizer, tokens: &[TokenLogprobs]) -> Value {
    let entry = |token: u32, logprob: f32| {
        let (text, bytes) = piece(tokenizer, token);
        json!({"token": text, "logprob": finite(logprob), "bytes": bytes})
    };
    let content: Vec<Value> = tokens
        .iter()
        .map(|t| {
            let mut e = entry(t.token, t.logprob);
            e["top_logprobs"] = t.top.iter().map(|&(tok, lp)| entry(tok, lp)).collect();
            e
        })
        .collect();
    json!({ "content": content })
}

/// Completions' `logprobs` object (`tokens`, `token_logprobs`, `top_logprobs`, `text_offset`).
pub fn completion_logprobs(tokenizer: &Tokenizer, tokens: &[TokenLogprobs], text_start: usize) -> Value {
    let mut offset = text_start;
    let mut texts = Vec::with_capacity(tokens.len());
    let mut offsets = Vec::with_capacity(tokens.len());
    for t in tokens {
        let (text, _) = piece(tokenizer, t.token);
        offsets.push(offset);
        offset += text.len();
        texts.push(text);
    }
    let top: Vec<Value> = tokens
        .iter()
        .map(|t| {
            let map: serde_json::Map<String, Value> =
                t.top.iter().map(|&(tok, lp)| (piece(tokenizer, tok).0, json!(finite(lp)))).collect();
            Value::Object(map)
        })
        .collect();
    json!({
        "tokens": texts,
        "token_logprobs": tokens.iter().map(|t| finite(t.logprob)).collect::<Vec<_>>(),
        "top_logprobs": top,
        "text_offset": offsets,
    })
}

/// JSON has no infinity: an impossible token's log-probability is shown as -9999.
fn finite(lp: f32) -> f32 {
    if lp.is_finite() { lp } else { -9999.0 }
}
