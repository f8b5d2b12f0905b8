//! The JSON bodies of `/v1/chat/completions` and `/v1/completions`, read
//! into checked generation settings. Every field a client may send is read
//! or ignored on purpose; a value out of range is a 400 naming the field.

use gantry::model::chat_template::ChatMessage;
use gantry::model::sampler::SamplerParams;
use serde::Deserialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::token_choice::GenerationParams;

/// Most stop strings a request may give.
pub const MAX_STOPS: usize = 16;
/// Most alternatives per token `top_logprobs` / `logprobs` may ask for.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The sampling fields both endpoints share.
#[derive(Debug, Default, Deserialize)]
pub struct SamplingFields {
    /// The model asked for.
    pub model: Option<String>,
    max_tokens: Option<i64>,
    max_completion_tokens: Option<i64>,
    /// llama-server's name for `max_tokens` (−1: up to the server's cap).
    n_predict: Option<i64>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<i64>,
    min_p: Option<f64>,
    seed: Option<i64>,
    stop: Option<Value>,
    presence_penalty: Option<f64>,
    frequency_penalty: Option<f64>,
    repeat_penalty: Option<f64>,
    /// How many of the last tokens `repeat_penalty` looks at (llama-server's
    /// `repeat_last_n`, or `penalty_last_n`): 0 off, −1 all of them.
    #[serde(alias = "penalty_last_n")]
    repeat_last_n: Option<i64>,
    n: Option<i64>,
    #[serde(default)]
    ignore_eos: bool,
    response_format: Option<Value>,
    /// Stream the reply as server-sent events.
    #[serde(default)]
    pub stream: bool,
    stream_options: Option<StreamOptions>,
    /// Every other field: refused when it is one of [`UNSUPPORTED`] with a
    /// value that would change the reply, ignored otherwise (`user`,
    /// `metadata`, `store`, … change nothing here).
    #[serde(flatten)]
    others: serde_json::Map<String, Value>,
}

/// Fields of OpenAI's and llama-server's APIs that would change the reply
/// and that this server does not implement: each with the values that
/// leave the reply as it is (accepted, as is `null`), and what to use
/// instead. Refused rather than silently ignored.
const UNSUPPORTED: &[(&str, &[Neutral], &str)] = &[
    ("logit_bias", &[Neutral::Empty], ""),
    ("grammar", &[Neutral::Empty], ": use `response_format` with a JSON schema"),
    ("json_schema", &[Neutral::Empty], ": use `response_format: {\"type\": \"json_schema\", ...}`"),
    ("functions", &[Neutral::Empty], ": use `tools`"),
    ("function_call", &[Neutral::Empty, Neutral::Text("none")], ": use `tool_choice`"),
    ("best_of", &[Neutral::Number(1.0)], ""),
    ("min_tokens", &[Neutral::Number(0.0)], ""),
    ("mirostat", &[Neutral::Number(0.0)], ""),
    ("typical_p", &[Neutral::Number(1.0)], ""),
    ("min_keep", &[Neutral::Number(0.0), Neutral::Number(1.0)], ""),
    ("tfs_z", &[Neutral::Number(1.0)], ""),
    ("top_n_sigma", &[Neutral::Number(-1.0)], ""),
    ("dynatemp_range", &[Neutral::Number(0.0)], ""),
    ("dry_multiplier", &[Neutral::Number(0.0)], ""),
    ("xtc_probability", &[Neutral::Number(0.0)], ""),
    ("n_probs", &[Neutral::Number(0.0)], ": use `logprobs`"),
    ("audio", &[Neutral::Empty], ""),
    ("modalities", &[Neutral::Empty, Neutral::OnlyText("text")], ""),
    ("lora", &[Neutral::Empty], ""),
    ("image_data", &[Neutral::Empty], ""),
    ("multimodal_data", &[Neutral::Empty], ""),
    ("n_indent", &[Neutral::Number(0.0)], ""),
    // The chat route takes `tools` itself; a completion would ignore them.
    ("tools", &[Neutral::Empty], ": tools are taken by /v1/chat/completions"),
    ("tool_choice", &[Neutral::Text("none"), Neutral::Text("auto")], ": tools are taken by /v1/chat/completions"),
    ("samplers", &[Neutral::Empty], ""),
    ("t_max_predict_ms", &[Neutral::Number(0.0)], ""),
    ("n_cmpl", &[Neutral::Number(1.0)], ": this server returns one choice per request"),
    ("post_sampling_probs", &[Neutral::False], ": use `logprobs`"),
    // The chat route renders the template as OpenAI's chat does: ending
    // with the assistant's turn opened, no variables of the caller's.
    ("add_generation_prompt", &[Neutral::True], ""),
    ("continue_final_message", &[Neutral::False], ""),
    ("chat_template_kwargs", &[Neutral::Empty], ""),
];

/// A value of an unsupported field that changes nothing.
#[derive(Debug, Clone, Copy)]
enum Neutral {
    /// `""`, `{}`, `[]` (and `null`, always neutral).
    Empty,
    /// This number.
    Number(f64),
    /// This string.
    Text(&'static str),
    /// `false`.
    False,
    /// `true`.
    True,
    /// A list of this one string.
    OnlyText(&'static str),
}

impl Neutral {
    fn holds(self, v: &Value) -> bool {
        match (self, v) {
            (_, Value::Null) => true,
            (Neutral::Empty, Value::String(s)) => s.is_empty(),
            (Neutral::Empty, Value::Object(m)) => m.is_empty(),
            (Neutral::Empty, Value::Array(a)) => a.is_empty(),
            (Neutral::Number(n), Value::Number(x)) => x.as_f64() == Some(n),
            (Neutral::Text(t), Value::String(s)) => s == t,
            (Neutral::False, Value::Bool(b)) => !b,
            (Neutral::True, Value::Bool(b)) => *b,
            (Neutral::OnlyText(t), Value::Array(a)) => a.len() == 1 && a[0] == t,
            _ => false,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// A chat request.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<Value>,
    /// The shared fields.
    #[serde(flatten)]
    pub sampling: SamplingFields,
    #[serde(default)]
    logprobs: bool,
    top_logprobs: Option<i64>,
    /// Functions the model may call.
    pub tools: Option<Value>,
    /// Whether and which it must call.
    pub tool_choice: Option<Value>,
}

/// A completion request.
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    /// Text, token ids, or a one-element list of either.
    pub prompt: Value,
    /// The shared fields.
    #[serde(flatten)]
    pub sampling: SamplingFields,
    logprobs: Option<i64>,
    #[serde(default)]
    echo: bool,
    suffix: Option<String>,
}

/// A completion prompt: text to tokenize, or token ids as given.
#[derive(Debug, PartialEq, Eq)]
pub enum Prompt {
    /// Text (tokenized with the model's BOS, special tokens parsed).
    Text(String),
    /// Token ids.
    Tokens(Vec<u32>),
}

/// Parses a JSON body into `T`, a 400 naming what is wrong.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        // serde_json reports a lone UTF-16 surrogate (`"\ud800abc"`) as an
        // escape cut short: say what it is.
        let hint = if e.to_string().contains("hex escape") {
            " (a \\uD800-\\uDFFF escape is half of a surrogate pair and must be followed by its other half)"
        } else {
            ""
        };
        ApiError::bad_request(format!("the request body is not valid: {e}{hint}"))
    })
}

fn range_f(name: &str, v: Option<f64>, lo: f64, hi: f64, default: f64) -> Result<f32, ApiError> {
    match v {
        None => Ok(default as f32),
        Some(x) if x.is_finite() && (lo..=hi).contains(&x) => Ok(x as f32),
        Some(x) => Err(ApiError::bad_request(format!("`{name}` = {x} is outside [{lo}, {hi}]"))),
    }
}

/// What shape the reply must have (`response_format`).
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// Any text.
    Text,
    /// A JSON value valid under this schema (`json_object` is `{"type": "object"}`).
    JsonSchema(Value),
}

impl SamplingFields {
    /// `response_format`: `{"type": "text"}`, `{"type": "json_object"}` or
    /// `{"type": "json_schema", "json_schema": {"schema": {...}}}`.
    pub fn response_format(&self) -> Result<ResponseFormat, ApiError> {
        let Some(f) = self.response_format.as_ref().filter(|f| !f.is_null()) else { return Ok(ResponseFormat::Text) };
        let object = || serde_json::json!({"type": "object"});
        match f.get("type").and_then(Value::as_str) {
            Some("text") => Ok(ResponseFormat::Text),
            // llama-server's extension: a schema beside json_object.
            Some("json_object") => Ok(ResponseFormat::JsonSchema(f.get("schema").cloned().unwrap_or_else(object))),
            Some("json_schema") => match f.get("json_schema").and_then(|j| j.get("schema")) {
                Some(schema) if schema.is_object() || schema.is_boolean() => {
                    Ok(ResponseFormat::JsonSchema(schema.clone()))
                }
                _ => Err(ApiError::bad_request("`response_format.json_schema.schema` must be a JSON schema object")),
            },
            other => Err(ApiError::bad_request(format!(
                "`response_format.type` {}: expected \"text\", \"json_object\" or \"json_schema\"",
                other.map_or_else(|| "is missing".to_owned(), |t| format!("{t:?}"))
            ))),
        }
    }

    /// Whether a streamed reply ends with a chunk of usage only (OpenAI's `stream_options`).
    pub fn include_usage(&self) -> bool {
        self.stream_options.as_ref().is_some_and(|o| o.include_usage)
    }

    /// The checked settings; `max_tokens_cap` is the server's `--max-tokens`.
    pub fn params(&self, max_tokens_cap: usize, logprobs: Option<usize>) -> Result<GenerationParams, ApiError> {
        for &(name, neutral, instead) in UNSUPPORTED {
            if let Some(v) = self.others.get(name)
                && !neutral.iter().any(|n| n.holds(v))
            {
                // Numbers and short strings are shown; lists and objects only named.
                let shown = match v {
                    Value::Number(_) | Value::Bool(_) => format!(" = {v}"),
                    Value::String(t) if t.len() <= 40 => format!(" = {v}"),
                    _ => String::new(),
                };
                return Err(ApiError::bad_request(format!("`{name}`{shown} is not supported by this server{instead}")));
            }
        }
        if let Some(n) = self.n
            && n != 1
        {
            return Err(ApiError::bad_request(format!("`n` = {n}: this server returns one choice per request")));
        }
        // llama-server lets `n_predict` win over `max_tokens`, OpenAI's
        // clients send `max_tokens`: two that differ are refused, not chosen.
        if let (Some(n), Some(m)) = (self.n_predict, self.max_completion_tokens.or(self.max_tokens))
            && n != m
        {
            return Err(ApiError::bad_request(format!(
                "`n_predict` = {n} and `max_tokens` = {m} disagree: give one of them"
            )));
        }
        let max_tokens = match self.max_completion_tokens.or(self.max_tokens).or(self.n_predict) {
            None => max_tokens_cap,
            // llama-server's "as many as may be".
            Some(-1) if self.max_completion_tokens.or(self.max_tokens).is_none() => max_tokens_cap,
            Some(m) if m >= 1 && m as u64 <= max_tokens_cap as u64 => m as usize,
            Some(m) => {
                return Err(ApiError::bad_request(format!(
                    "`{}` = {m} is outside [1, {max_tokens_cap}] (this server's --max-tokens)",
                    if self.max_completion_tokens.is_some() {
                        "max_completion_tokens"
                    } else if self.max_tokens.is_some() {
                        "max_tokens"
                    } else {
                        "n_predict"
                    }
                )));
            }
        };
        let top_k = match self.top_k {
            None => 40,
            Some(k) if (0..=1_000_000).contains(&k) => k as usize,
            Some(k) => return Err(ApiError::bad_request(format!("`top_k` = {k}: from 0 (all) to 1000000"))),
        };
        let sampler = SamplerParams {
            // OpenAI's default temperature is 1.
            temperature: range_f("temperature", self.temperature, 0.0, 2.0, 1.0)?,
            top_k,
            top_p: range_f("top_p", self.top_p, 0.0, 1.0, 1.0)?,
            min_p: range_f("min_p", self.min_p, 0.0, 1.0, 0.0)?,
            repeat_penalty: range_f("repeat_penalty", self.repeat_penalty, 0.0, 10.0, 1.0)?,
            repeat_last_n: match self.repeat_last_n {
                None => SamplerParams::default().repeat_last_n,
                Some(-1) => usize::MAX,
                Some(n) if (0..=1_000_000).contains(&n) => n as usize,
                Some(n) => {
                    return Err(ApiError::bad_request(format!(
                        "`repeat_last_n` = {n}: from 0 (off) to 1000000 tokens, or -1 (all of them)"
                    )));
                }
            },
            // The seed of an unseeded request comes from the clock: each differs.
            seed: self.seed.map_or_else(clock_seed, |s| s as u64),
        };
        if sampler.repeat_penalty <= 0.0 {
            return Err(ApiError::bad_request("`repeat_penalty` must be positive (1 = off)"));
        }
        if sampler.top_p <= 0.0 {
            return Err(ApiError::bad_request("`top_p` must be above 0"));
        }
        Ok(GenerationParams {
            sampler,
            presence_penalty: range_f("presence_penalty", self.presence_penalty, -2.0, 2.0, 0.0)?,
            frequency_penalty: range_f("frequency_penalty", self.frequency_penalty, -2.0, 2.0, 0.0)?,
            logprobs,
            max_tokens,
            stop: stops(self.stop.as_ref())?,
            ignore_eos: self.ignore_eos,
        })
    }
}

/// A seed that differs between requests that give none.
fn clock_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// `stop`: a string or a list of strings.
fn stops(v: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or(()))
            .collect::<Result<_, _>>()
            .map_err(|()| ApiError::bad_request("`stop` must be a string or a list of strings"))?,
        Some(_) => return Err(ApiError::bad_request("`stop` must be a string or a list of strings")),
    };
    if list.len() > MAX_STOPS {
        return Err(ApiError::bad_request(format!("`stop` has {} strings; at most {MAX_STOPS}", list.len())));
    }
    Ok(list)
}

impl ChatRequest {
    /// The conversation as the chat template takes it.
    pub fn messages(&self) -> Result<Vec<ChatMessage>, ApiError> {
        if self.messages.is_empty() {
            return Err(ApiError::bad_request("`messages` is empty"));
        }
        self.messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let role = match m.get("role") {
                    Some(Value::String(role)) => role.as_str(),
                    None => return Err(ApiError::bad_request(format!("`messages[{i}].role` is missing"))),
                    Some(_) => return Err(ApiError::bad_request(format!("`messages[{i}].role` must be a string"))),
                };
                let mut content = content_text(m.get("content"))
                    .map_err(|why| ApiError::bad_request(format!("`messages[{i}].content`: {why}")))?;
                // An earlier tool call is shown to the model as the JSON it wrote.
                if let Some(calls) = crate::tools::calls_as_text(m) {
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(&calls);
                }
                // An assistant's earlier reasoning (llama.cpp's `reasoning_content`), for
                // templates that show it (gpt-oss's analysis channel).
                let reasoning = match m.get("reasoning_content") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(text)) => text.clone(),
                    Some(_) => {
                        return Err(ApiError::bad_request(format!(
                            "`messages[{i}].reasoning_content` is not a string"
                        )));
                    }
                };
                Ok(ChatMessage::new(role, &content).with_reasoning(&reasoning))
            })
            .collect()
    }

    /// How many alternatives per token the reply's log-probabilities list (`None`: no log-probabilities).
    pub fn logprobs(&self) -> Result<Option<usize>, ApiError> {
        match (self.logprobs, self.top_logprobs) {
            (false, None | Some(0)) => Ok(None),
            (false, Some(_)) => Err(ApiError::bad_request("`top_logprobs` needs `logprobs`: true")),
            (true, None) => Ok(Some(0)),
            (true, Some(n)) if (0..=MAX_TOP_LOGPROBS as i64).contains(&n) => Ok(Some(n as usize)),
            (true, Some(n)) => {
                Err(ApiError::bad_request(format!("`top_logprobs` = {n} is outside [0, {MAX_TOP_LOGPROBS}]")))
            }
        }
    }
}

/// A message's text: a string, null, or a list of `{"type": "text", "text": ...}` parts.
fn content_text(v: Option<&Value>) -> Result<String, String> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => text.push_str(t),
                    (Some("text"), None) => return Err("a text part without its `text`".into()),
                    (kind, _) => {
                        let kind = kind.map_or_else(|| "without a `type`".to_owned(), |k| format!("of type {k:?}"));
                        return Err(format!("a part {kind}; this model reads text parts only"));
                    }
                }
            }
            Ok(text)
        }
        Some(_) => Err("expected a string or a list of text parts".into()),
    }
}

impl CompletionRequest {
    /// The prompt.
    pub fn prompt(&self) -> Result<Prompt, ApiError> {
        let bad = || ApiError::bad_request("`prompt` must be a string, a list of token ids, or a list of one of those");
        let one = |v: &Value| -> Result<Prompt, ApiError> {
            match v {
                Value::String(s) => Ok(Prompt::Text(s.clone())),
                Value::Array(ids) => ids
                    .iter()
                    .map(|i| i.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(bad))
                    .collect::<Result<_, _>>()
                    .map(Prompt::Tokens),
                _ => Err(bad()),
            }
        };
        match &self.prompt {
            Value::Array(items) if items.iter().all(|i| i.is_string() || i.is_array()) && !items.is_empty() => {
                match items.as_slice() {
                    [only] => one(only),
                    _ => Err(ApiError::bad_request(format!(
                        "`prompt` lists {} prompts; this server takes one per request",
                        items.len()
                    ))),
                }
            }
            v => one(v),
        }
    }

    /// Alternatives per token (`logprobs` = N), `None` without.
    pub fn logprobs(&self) -> Result<Option<usize>, ApiError> {
        match self.logprobs {
            None => Ok(None),
            Some(n) if (0..=MAX_TOP_LOGPROBS as i64).contains(&n) => Ok(Some(n as usize)),
            Some(n) => Err(ApiError::bad_request(format!("`logprobs` = {n} is outside [0, {MAX_TOP_LOGPROBS}]"))),
        }
    }

    /// Refuses what this server does not do (`echo`, `suffix`).
    pub fn check_unsupported(&self) -> Result<(), ApiError> {
        if self.echo {
            return Err(ApiError::bad_request("`echo` is not supported"));
        }
        if self.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(ApiError::bad_request("`suffix` (fill in the middle) is not supported"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(body: &str) -> ChatRequest {
        parse(body.as_bytes()).expect("valid")
    }

    #[test]
    fn fields_that_would_change_the_reply_are_refused_not_ignored() {
        for (field, says) in [
            (r#""logit_bias":{"1000":100}"#, "logit_bias"),
            (r#""grammar":"root ::= \"a\"""#, "grammar"),
            (r#""json_schema":{"type":"integer"}"#, "json_schema"),
            (r#""functions":[{"name":"f","parameters":{}}],"function_call":{"name":"f"}"#, "use `tools`"),
            (r#""function_call":"auto""#, "use `tool_choice`"),
            (r#""best_of":2"#, "best_of"),
            (r#""min_tokens":5"#, "min_tokens"),
            (r#""mirostat":2"#, "mirostat"),
            (r#""typical_p":0.5"#, "typical_p"),
            (r#""min_keep":1000"#, "min_keep"),
            (r#""dry_multiplier":0.8"#, "dry_multiplier"),
            (r#""xtc_probability":0.5"#, "xtc_probability"),
            (r#""n_probs":3"#, "use `logprobs`"),
            (r#""samplers":["temperature"]"#, "samplers"),
            (r#""t_max_predict_ms":100"#, "t_max_predict_ms"),
            (r#""n_cmpl":2"#, "one choice per request"),
            (r#""post_sampling_probs":true"#, "post_sampling_probs"),
            (r#""add_generation_prompt":false"#, "add_generation_prompt"),
            (r#""chat_template_kwargs":{"style":"x"}"#, "chat_template_kwargs"),
            (r#""modalities":["text","audio"]"#, "modalities"),
            (r#""lora":[{"id":0,"scale":1}]"#, "lora"),
            (r#""image_data":[{"data":"x","id":1}]"#, "image_data"),
            (r#""n_indent":4"#, "n_indent"),
        ] {
            let r = chat(&format!(r#"{{"messages":[{{"role":"user","content":"hi"}}],{field}}}"#));
            let e = r.sampling.params(100, None).expect_err(field);
            assert!(e.message.contains(says) && e.message.contains("not supported"), "{e}");
        }
        // Values that change nothing, and fields that change nothing here.
        let r = chat(
            r#"{"messages":[{"role":"user","content":"hi"}],"logit_bias":{},"grammar":"","functions":[],
            "function_call":"none","best_of":1,"mirostat":0,"typical_p":1.0,"dry_multiplier":null,
            "user":"u","metadata":{"a":"b"},"store":false,"parallel_tool_calls":true,"modalities":["text"]}"#,
        );
        r.sampling.params(100, None).expect("neutral");
    }

    /// llama-server's window of the repeat penalty, under either name, was
    /// accepted and ignored (the window stayed 64).
    #[test]
    fn the_repeat_penalty_window_is_taken_under_both_names() {
        let body = |extra: &str| chat(&format!(r#"{{"messages":[{{"role":"user","content":"hi"}}]{extra}}}"#));
        let window = |extra: &str| body(extra).sampling.params(100, None).map(|p| p.sampler.repeat_last_n);
        assert_eq!(window("").unwrap(), 64);
        assert_eq!(window(r#","repeat_last_n":0"#).unwrap(), 0);
        assert_eq!(window(r#","penalty_last_n":8"#).unwrap(), 8);
        assert_eq!(window(r#","repeat_last_n":-1"#).unwrap(), usize::MAX);
        for bad in [r#","repeat_last_n":-2"#, r#","penalty_last_n":100000000"#] {
            assert!(window(bad).unwrap_err().message.contains("`repeat_last_n`"), "{bad}");
        }
    }

    #[test]
    fn n_predict_is_max_tokens() {
        let body = |extra: &str| chat(&format!(r#"{{"messages":[{{"role":"user","content":"hi"}}]{extra}}}"#));
        assert_eq!(body(r#","n_predict":7"#).sampling.params(100, None).unwrap().max_tokens, 7);
        assert_eq!(body(r#","n_predict":-1"#).sampling.params(100, None).unwrap().max_tokens, 100);
        assert_eq!(body(r#","n_predict":5,"max_tokens":5"#).sampling.params(100, None).unwrap().max_tokens, 5);
        let e = body(r#","n_predict":-1,"max_tokens":5"#).sampling.params(100, None).unwrap_err();
        assert!(e.message.contains("disagree"), "{e}");
        let e = body(r#","n_predict":101"#).sampling.params(100, None).unwrap_err();
        assert!(e.message.contains("`n_predict` = 101"), "{e}");
    }

    #[test]
    fn fields_out_of_range_name_themselves() {
        let r = chat(r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":3}"#);
        let e = r.sampling.params(100, None).expect_err("temperature 3");
        assert!(e.message.contains("temperature"), "{e}");
        let r = chat(r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":101}"#);
        assert!(r.sampling.params(100, None).expect_err("too many").message.contains("--max-tokens"));
        let r = chat(r#"{"messages":[{"role":"user","content":"hi"}],"n":2}"#);
        assert!(r.sampling.params(100, None).is_err());
        let r = chat(r#"{"messages":[{"role":"user","content":"hi"}],"stop":7}"#);
        assert!(r.sampling.params(100, None).expect_err("stop").message.contains("stop"));
        assert!(parse::<ChatRequest>(b"{\"messages\": 3}").is_err());
        assert!(parse::<ChatRequest>(b"not json").is_err());
        // Each says the cause, not another one.
        let r = chat(r#"{"messages":[{"role":"user","content":"hi"}],"top_k":16777216}"#);
        let e = r.sampling.params(100, None).expect_err("top_k");
        assert!(e.message.contains("`top_k` = 16777216: from 0 (all) to 1000000"), "{e}");
        let e = chat(r#"{"messages":[{"role":5,"content":"hi"}]}"#).messages().expect_err("role");
        assert!(e.message.contains("`messages[0].role` must be a string"), "{e}");
        let e = chat(r#"{"messages":[{"content":"hi"}]}"#).messages().expect_err("role");
        assert!(e.message.contains("`messages[0].role` is missing"), "{e}");
        let Err(e) = parse::<ChatRequest>(br#"{"messages":[{"role":"user","content":"\ud800abc"}]}"#) else {
            panic!("a lone surrogate parsed")
        };
        assert!(e.message.contains("half of a surrogate pair"), "{e}");
    }

    #[test]
    fn messages_take_text_parts_and_settings_their_defaults() {
        let r = chat(
            r#"{"messages":[{"role":"system","content":null},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
                "seed":5,"stop":["x","y"],"max_completion_tokens":3,"logprobs":true,"top_logprobs":2}"#,
        );
        let m = r.messages().expect("messages");
        assert_eq!((m[0].content.as_str(), m[1].content.as_str()), ("", "ab"));
        let thought = chat(r#"{"messages":[{"role":"assistant","content":"4","reasoning_content":"2+2"}]}"#);
        assert_eq!(thought.messages().expect("messages")[0].reasoning_content, "2+2");
        let bad = chat(r#"{"messages":[{"role":"assistant","content":"4","reasoning_content":7}]}"#);
        assert!(bad.messages().expect_err("a number").message.contains("reasoning_content"));
        let p = r.sampling.params(100, r.logprobs().expect("lp")).expect("params");
        assert_eq!((p.max_tokens, p.sampler.seed, p.stop.len(), p.logprobs), (3, 5, 2, Some(2)));
        assert_eq!(p.sampler.temperature, 1.0);
        let f = chat(
            r#"{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array"}}}}"#,
        );
        assert_eq!(
            f.sampling.response_format().expect("format"),
            ResponseFormat::JsonSchema(serde_json::json!({"type":"array"}))
        );
        let f = chat(r#"{"messages":[],"response_format":{"type":"json_object"}}"#);
        assert_eq!(
            f.sampling.response_format().expect("format"),
            ResponseFormat::JsonSchema(serde_json::json!({"type":"object"}))
        );
        assert!(chat(r#"{"messages":[],"response_format":{"type":"yaml"}}"#).sampling.response_format().is_err());
        assert!(
            chat(r#"{"messages":[],"response_format":{"type":"json_schema"}}"#).sampling.response_format().is_err()
        );
        let image = chat(r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}"#);
        assert!(image.messages().is_err());
    }

    #[test]
    fn completion_prompts() {
        let p = |body: &str| parse::<CompletionRequest>(body.as_bytes()).expect("valid").prompt();
        assert_eq!(p(r#"{"prompt":"hi"}"#).expect("text"), Prompt::Text("hi".into()));
        assert_eq!(p(r#"{"prompt":[1,2]}"#).expect("ids"), Prompt::Tokens(vec![1, 2]));
        assert_eq!(p(r#"{"prompt":[[3]]}"#).expect("nested"), Prompt::Tokens(vec![3]));
        assert_eq!(p(r#"{"prompt":["a"]}"#).expect("one"), Prompt::Text("a".into()));
        assert!(p(r#"{"prompt":["a","b"]}"#).is_err());
        assert!(p(r#"{"prompt":[-1]}"#).is_err());
        assert!(p(r#"{"prompt":{}}"#).is_err());
        // A completion has no tool calls: `tools` would be ignored, so it is refused (the chat route takes them).
        for body in [r#"{"prompt":"hi","tools":[{"type":"function"}]}"#, r#"{"prompt":"hi","tool_choice":"required"}"#]
        {
            let e = parse::<CompletionRequest>(body.as_bytes()).unwrap().sampling.params(100, None).unwrap_err();
            assert!(e.message.contains("/v1/chat/completions"), "{e}");
        }
        let chat = chat(r#"{"messages":[{"role":"user","content":"hi"}],"tools":[]}"#);
        chat.sampling.params(100, None).expect("the chat route's own field");
    }
}
