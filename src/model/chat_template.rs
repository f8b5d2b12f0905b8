//! Chat templates: the GGUF's `tokenizer.chat_template` (Jinja) rendered
//! with `minijinja`, as llama.cpp renders it with its own Jinja engine: the
//! messages, `add_generation_prompt`, `bos_token` and `eos_token`,
//! `enable_thinking`, today's date as `date_string` and `datetime`, the
//! `raise_exception` and `strftime_now` functions templates call, and the
//! Python string methods they use (`strip`, `startswith`, `split`, ...).
//!
//! llama.cpp also adjusts the messages before some templates see them, and
//! so does Gantry, as far as a chat needs it: a template that ignores the
//! system message gets it prepended to the next message (Gemma 2 would
//! otherwise refuse it); the `developer` role becomes `system` except for
//! gpt-oss; and gpt-oss reads an assistant's reasoning from `thinking`.
//!
//! A template comes with the model file (or `--chat-template`), so it is
//! untrusted code: a render runs on minijinja's fuel, which bounds both its
//! instructions and the data it creates, writes at most
//! [`Limits::max_template_output`] bytes, and the Python methods below pay
//! for what they allocate before allocating it. A template that loops
//! forever or builds a huge string is an error naming the template.
//!
//! Fuel counts the data a template creates, not what it holds at once, so
//! the fuel is also what bounds a render's memory. Each render gets fuel
//! in proportion to the conversation it is given ([`render_fuel`]): real
//! templates' work grows with the bytes and, for some, the square of the
//! messages; a hostile template given a short chat can create only 16 MiB
//! or so (measured by `tests/models/fuzz_regressions.rs`), and no render
//! gets more than [`Limits::max_template_fuel`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use gantry_engine::Limits;
use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error as JinjaError, ErrorKind, State};

use crate::model::gguf::Gguf;
use crate::model::template_operators;
use crate::model::tokenizer::Tokenizer;
use crate::{Error, Result};

/// The metadata key of a GGUF file's chat template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant` (or `developer`, `tool`).
    pub role: String,
    /// What was said.
    pub content: String,
    /// An assistant's reasoning before `content` (`reasoning_content` in
    /// OpenAI's API); empty for none, as llama.cpp treats it.
    pub reasoning_content: String,
}

impl ChatMessage {
    /// A message of `role`.
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.to_owned(), content: content.to_owned(), reasoning_content: String::new() }
    }

    /// The message with the reasoning that came before it.
    pub fn with_reasoning(mut self, reasoning: &str) -> Self {
        reasoning.clone_into(&mut self.reasoning_content);
        self
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    source: String,
    /// Behind a lock because each render sets its own fuel.
    env: Mutex<Environment<'static>>,
    bos: String,
    eos: String,
    max_output: usize,
    /// The most fuel any render gets ([`Limits::max_template_fuel`]).
    max_fuel: u64,
    /// The clock `strftime_now` and the date variables read.
    clock: Arc<Clock>,
    /// Whether the template shows a system message (else it is merged into the next one).
    system_role: bool,
    /// gpt-oss's harmony format (the template writes `<|channel|>`).
    harmony: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").field("source", &self.source).finish()
    }
}

impl ChatTemplate {
    /// The template of `gguf` (`tokenizer.chat_template`), with the
    /// tokenizer's BOS and EOS texts; `Ok(None)` when the file has none.
    pub fn from_gguf(gguf: &Gguf, tokenizer: &Tokenizer) -> Result<Option<Self>> {
        let Some(text) = gguf.get_opt::<&str>(CHAT_TEMPLATE_KEY)? else {
            return Ok(None);
        };
        let piece =
            |id: Option<u32>| id.and_then(|id| tokenizer.token(id).ok()).map_or_else(String::new, |t| t.text.clone());
        let source = format!("{} ({CHAT_TEMPLATE_KEY})", gguf.source());
        Self::with_limits(&source, text, &piece(tokenizer.bos()), &piece(tokenizer.eos()), gguf.limits()).map(Some)
    }

    /// Reads and compiles the template file at `path` (`--chat-template`):
    /// a regular file only (a FIFO would block the read), of at most
    /// [`Limits::max_template_output`] bytes; errors name the path.
    pub fn from_file(path: &std::path::Path, bos: &str, eos: &str) -> Result<Self> {
        let name = path.display().to_string();
        if let Some(what) = crate::model::regular_file::not_regular(path)? {
            return Err(Error::Model(format!("chat template {name}: {what}: a template is read from a regular file")));
        }
        let max = Limits::DEFAULT.max_template_output;
        let io = |source| Error::Io { context: format!("reading {name}"), source };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > max as u64 {
            return Err(Error::Model(format!("{name}: a chat template of {len} bytes (at most {max})")));
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        // A template file is not a model file: its errors say so.
        Self::new(&name, &text, bos, eos).map_err(|e| match e {
            Error::InvalidModel { file, reason } => Error::Model(format!("{file}: {reason}")),
            other => other,
        })
    }

    /// Compiles `template`; `source` names it in errors (a file and key).
    pub fn new(source: &str, template: &str, bos: &str, eos: &str) -> Result<Self> {
        Self::with_limits(source, template, bos, eos, &Limits::DEFAULT)
    }

    /// [`ChatTemplate::new`] with the fuel and output bounds of `limits`.
    pub fn with_limits(source: &str, template: &str, bos: &str, eos: &str, limits: &Limits) -> Result<Self> {
        let mut env = Environment::new();
        // Jinja's defaults as Hugging Face's chat templates expect them.
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| Error::Model(format!("configuring minijinja: {e}")))?;
        env.set_syntax(syntax.clone());
        env.add_function("raise_exception", |msg: String| -> std::result::Result<Value, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
        });
        let clock = Arc::new(Clock(AtomicU64::new(Clock::SYSTEM)));
        let read = Arc::clone(&clock);
        env.add_function("strftime_now", move |state: &State, format: String| {
            // Each `%x` writes at most 9 bytes (`September`).
            pay_for(state, format.len().saturating_mul(5))?;
            Ok::<_, JinjaError>(strftime(&format, read.now()))
        });
        // minijinja's own `range` computes its length unchecked (a step of
        // i64::MIN, or a negative step across the whole range, overflows).
        env.add_function("range", range);
        // minijinja's `debug` writes out its argument (or the whole context)
        // without fuel; no chat template needs it.
        env.remove_global("debug");
        // `pprint` indents by depth and did cubic work on deep data before
        // any fuel was charged; no chat template uses it.
        env.remove_filter("pprint");
        env.set_unknown_method_callback(python_method);
        // minijinja's lazy `+` and `chain` copy sequences without fuel once
        // they nest: both are replaced by eager ones that pay per item.
        env.add_function(template_operators::ADD_FUNCTION, template_operators::add);
        env.add_function(template_operators::CONCAT_FUNCTION, template_operators::concat);
        // minijinja compares, hashes and writes values out without fuel.
        env.add_function(template_operators::WALK_FUNCTION, template_operators::walk);
        // Nor does it bound how deep values nest, and writing one out or
        // dropping it recurses a level at a time.
        env.add_function(template_operators::NEST_FUNCTION, template_operators::nest);
        env.add_filter("chain", template_operators::chain);
        env.add_filter("tojson", template_operators::tojson);
        env.add_filter("string", template_operators::string);
        let does_not_parse = |e: String| Error::InvalidModel {
            file: source.to_owned(),
            reason: format!("the chat template does not parse: {e}"),
        };
        let rewritten = template_operators::rewrite_template(template, syntax).map_err(does_not_parse)?;
        env.add_template_owned("chat", rewritten).map_err(|e| does_not_parse(e.to_string()))?;
        let mut t = Self {
            source: source.to_owned(),
            env: Mutex::new(env),
            bos: bos.to_owned(),
            eos: eos.to_owned(),
            max_output: limits.max_template_output,
            max_fuel: limits.max_template_fuel,
            clock,
            system_role: true,
            harmony: template.contains("<|channel|>"),
        };
        t.system_role = t.shows_system_messages();
        Ok(t)
    }

    /// Renders as if the clock read `unix_seconds` (UTC), for prompts that
    /// must not change with the day (tests, reproductions); `None` goes
    /// back to the system clock.
    pub fn set_time(&self, unix_seconds: Option<u64>) {
        // u64::MAX seconds is past any date a template prints.
        self.clock.0.store(unix_seconds.map_or(Clock::SYSTEM, |t| t.min(Clock::SYSTEM - 1)), Ordering::Relaxed);
    }

    /// llama.cpp's test of a template's system role: one that never shows
    /// a system message (or fails on one) does not support it. llama.cpp
    /// asks whether the template read the content; Gantry whether it wrote it.
    fn shows_system_messages(&self) -> bool {
        const PROBE: &str = "System message 7f3a";
        let messages = [ChatMessage::new("system", PROBE), ChatMessage::new("user", "User message")];
        self.render_exactly(&messages, true).is_ok_and(|out| out.contains(PROBE))
    }

    /// The prompt for `messages`; with `add_generation_prompt`, ending where
    /// the assistant's reply begins. The messages are adjusted first as
    /// llama.cpp adjusts them (see the module's documentation).
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let mut messages = messages.to_vec();
        if !self.harmony {
            for m in &mut messages {
                if m.role == "developer" {
                    "system".clone_into(&mut m.role);
                }
            }
        }
        if !self.system_role && messages.first().is_some_and(|m| m.role == "system") {
            let system = messages.remove(0);
            if let Some(next) = messages.first_mut() {
                next.content = format!("{}\n{}", system.content, next.content);
            }
        }
        self.render_exactly(&messages, add_generation_prompt)
    }

    /// Renders `messages` as they are, with the variables llama.cpp gives
    /// every template.
    fn render_exactly(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let fuel = render_fuel(messages, self.max_fuel);
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                let mut v = BTreeMap::new();
                v.insert("role", Value::from(m.role.as_str()));
                v.insert("content", Value::from(m.content.as_str()));
                if !m.reasoning_content.is_empty() {
                    v.insert("reasoning_content", Value::from(m.reasoning_content.as_str()));
                    if self.harmony {
                        v.insert("thinking", Value::from(m.reasoning_content.as_str()));
                    }
                }
                Value::from(v)
            })
            .collect();
        let now = self.clock.now();
        let mut ctx = BTreeMap::new();
        ctx.insert("messages", Value::from(messages));
        ctx.insert("bos_token", Value::from(self.bos.as_str()));
        ctx.insert("eos_token", Value::from(self.eos.as_str()));
        ctx.insert("enable_thinking", Value::from(true));
        ctx.insert("datetime", Value::from(strftime("%b %d %Y", now)));
        ctx.insert("date_string", Value::from(strftime("%d %b %Y", now)));
        // llama.cpp defines it only when true: a template may ask `is defined`.
        if add_generation_prompt {
            ctx.insert("add_generation_prompt", Value::from(true));
        }
        let ctx = Value::from(ctx);
        // A render that panicked left nothing behind that the next one reads.
        let mut env = self.env.lock().unwrap_or_else(PoisonError::into_inner);
        env.set_fuel(Some(fuel));
        let template = env.get_template("chat").map_err(|e| self.error(e))?;
        let mut out = BoundedWriter { bytes: Vec::new(), max: self.max_output, over: false };
        // minijinja panics on a few templates (`loop.cycle()` with no
        // arguments divides by zero): an error naming the template, like any other.
        let rendered =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| template.render_captured_to(ctx, &mut out)))
                .map_err(|panic| {
                    Error::Model(format!(
                        "rendering the chat template of {}: minijinja failed on it ({})",
                        self.source,
                        crate::model::caught_panic::message(&*panic)
                    ))
                })?;
        match rendered {
            Ok(_) => {}
            Err(_) if out.over => {
                return Err(Error::Model(format!(
                    "rendering the chat template of {}: the prompt grew past {} bytes",
                    self.source, self.max_output
                )));
            }
            Err(e) if e.kind() == ErrorKind::OutOfFuel => {
                return Err(Error::Model(format!(
                    "rendering the chat template of {}: it ran out of fuel (it loops or builds data too long for a chat prompt)",
                    self.source
                )));
            }
            Err(e) => return Err(self.error(e)),
        }
        // minijinja writes whole strings, so the bytes are UTF-8.
        String::from_utf8(out.bytes).map_err(|e| Error::Model(format!("the chat template of {}: {e}", self.source)))
    }

    fn error(&self, e: JinjaError) -> Error {
        Error::Model(format!("rendering the chat template of {}: {e}", self.source))
    }
}

/// The fuel a render of `messages` gets: a base for the template's own
/// work, 2^18 (a quarter million instructions, or 16 MiB of data), plus 4
/// for each byte of the messages, 8 for each pair of messages and one for
/// 32 bytes of each message's view of the others (the messages times the
/// bytes), at most `max_fuel`.
///
/// Measured on the 64 templates of llama.cpp's `models/templates` that
/// minijinja renders (the
/// least fuel each needed, 1 to 1,000 messages of up to 10 KB): under 10,000
/// for 100 short messages but one (Gemma 4's, 58,558); at most 2.4 per byte
/// of 1 MB in 100 messages (Reka Edge's, which costs 0.024 times its
/// messages times its bytes); Gemma 4's costs 4.7 a pair of messages. Past the default
/// ceiling, Reka Edge's on 1,000 messages of 1 KB (24 million) and Gemma 4's
/// on more than about 1,900 messages fail with "ran out of fuel", naming the
/// template, unless [`Limits::max_template_fuel`] is raised.
pub fn render_fuel(messages: &[ChatMessage], max_fuel: u64) -> u64 {
    let bytes: u64 = messages.iter().map(|m| (m.role.len() + m.content.len() + m.reasoning_content.len()) as u64).sum();
    let count = messages.len() as u64;
    (1u64 << 18)
        .saturating_add(bytes.saturating_mul(4))
        .saturating_add(count.saturating_mul(count).saturating_mul(8))
        .saturating_add(count.saturating_mul(bytes) / 32)
        .min(max_fuel)
}

/// The render's output, refused past `max` bytes (with fuel, a template
/// could still write up to 64 bytes a unit of fuel; the prompt must stay
/// far smaller).
struct BoundedWriter {
    bytes: Vec<u8>,
    max: usize,
    over: bool,
}

impl std::io::Write for BoundedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len().saturating_add(buf.len()) > self.max || self.bytes.try_reserve(buf.len()).is_err() {
            self.over = true;
            return Err(std::io::Error::other("the chat template's output is too long"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Pays fuel for `bytes` about to be allocated (minijinja charges one fuel
/// per 64 bytes of data), so a method's result is refused before it is made.
fn pay_for(state: &State, bytes: usize) -> std::result::Result<(), JinjaError> {
    state.consume_fuel((bytes / 64) as u64 + 1)
}

/// The time templates see, in Unix seconds: the system clock's, or a set one.
struct Clock(AtomicU64);

impl Clock {
    /// The stored value that means "read the system clock".
    const SYSTEM: u64 = u64::MAX;

    fn now(&self) -> u64 {
        match self.0.load(Ordering::Relaxed) {
            Self::SYSTEM => {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
            }
            t => t,
        }
    }
}

/// Python's `strftime` for the UTC time `secs` (Unix seconds), as
/// templates call it through `strftime_now`: `%Y %y %m %d %e %j %H %I %M %S
/// %p %b %B %a %A %%`; any other `%x` is written as it is.
fn strftime(format: &str, secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
    let days = (secs / 86400) as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    const BEFORE: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = BEFORE[(month - 1) as usize] + day + i64::from(leap && month > 2);
    // 1970-01-01 was a Thursday.
    let weekday = DAYS[(days + 4).rem_euclid(7) as usize];
    let month_name = MONTHS[(month - 1) as usize];
    let (hour, minute, second) = (secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('e') => out.push_str(&format!("{day:2}")),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('H') => out.push_str(&format!("{hour:02}")),
            Some('I') => out.push_str(&format!("{:02}", (hour + 11) % 12 + 1)),
            Some('M') => out.push_str(&format!("{minute:02}")),
            Some('S') => out.push_str(&format!("{second:02}")),
            Some('p') => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            Some('b') => out.push_str(&month_name[..3]),
            Some('B') => out.push_str(month_name),
            Some('a') => out.push_str(&weekday[..3]),
            Some('A') => out.push_str(weekday),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The most items `range` gives (minijinja's own bound).
const MAX_RANGE: i128 = 100_000;

/// Python's `range(stop)`, `range(start, stop[, step])`, as minijinja's,
/// with its length computed in 128 bits: any `i64` arguments give a list or
/// an error, never an overflow.
fn range(state: &State, lower: i64, upper: Option<i64>, step: Option<i64>) -> std::result::Result<Value, JinjaError> {
    let (start, end) = match upper {
        Some(upper) => (i128::from(lower), i128::from(upper)),
        None => (0, i128::from(lower)),
    };
    let step = i128::from(step.unwrap_or(1));
    let len = match step {
        0 => return Err(JinjaError::new(ErrorKind::InvalidOperation, "cannot create range with step of 0")),
        s if s > 0 && end > start => (end - start + s - 1) / s,
        s if s < 0 && start > end => (start - end - s - 1) / -s,
        _ => 0,
    };
    if len > MAX_RANGE {
        return Err(JinjaError::new(ErrorKind::InvalidOperation, "range has too many elements"));
    }
    // The list is paid for before it is made (a value a slot, as minijinja
    // prices list slots): a loop that makes `range(100000)` at every turn
    // otherwise ran for seconds on a few instructions a turn.
    pay_for(state, (len as usize).saturating_mul(32))?;
    // Every item lies between `start` and `end`, both `i64`.
    Ok(Value::from((0..len).map(|i| (start + i * step) as i64).collect::<Vec<_>>()))
}

/// The Python methods chat templates call on strings and dicts.
fn python_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> std::result::Result<Value, JinjaError> {
    let arg = |i: usize| args.get(i).and_then(|v| v.as_str().map(str::to_owned));
    if let Some(s) = value.as_str() {
        // What each method may allocate, paid before it is allocated: a
        // `replace` of every character by a long string multiplies the
        // length, `upper` may triple it, `split` makes a value per piece.
        let cost = match method {
            "replace" => match (arg(0), arg(1)) {
                (Some(from), Some(to)) => {
                    let hits = if from.is_empty() { s.chars().count() + 1 } else { s.matches(from.as_str()).count() };
                    hits.saturating_mul(to.len()).saturating_add(s.len())
                }
                _ => 0,
            },
            "upper" | "lower" => s.len().saturating_mul(3),
            "split" => s.len().saturating_mul(33),
            _ => s.len(),
        };
        pay_for(state, cost)?;
        let chars = arg(0);
        let trim: &dyn Fn(char) -> bool = &|c: char| match &chars {
            Some(set) => set.contains(c),
            None => c.is_whitespace(),
        };
        return Ok(match method {
            "strip" => Value::from(s.trim_matches(trim)),
            "lstrip" => Value::from(s.trim_start_matches(trim)),
            "rstrip" => Value::from(s.trim_end_matches(trim)),
            "startswith" => Value::from(arg(0).is_some_and(|p| s.starts_with(p.as_str()))),
            "endswith" => Value::from(arg(0).is_some_and(|p| s.ends_with(p.as_str()))),
            "upper" => Value::from(s.to_uppercase()),
            "lower" => Value::from(s.to_lowercase()),
            "replace" => match (arg(0), arg(1)) {
                (Some(from), Some(to)) => Value::from(s.replace(from.as_str(), &to)),
                _ => return Err(JinjaError::new(ErrorKind::MissingArgument, "replace(old, new)")),
            },
            "split" => match arg(0) {
                Some(sep) => Value::from(s.split(sep.as_str()).map(Value::from).collect::<Vec<_>>()),
                None => Value::from(s.split_whitespace().map(Value::from).collect::<Vec<_>>()),
            },
            _ => return Err(JinjaError::new(ErrorKind::UnknownMethod, format!("str has no method {method}"))),
        });
    }
    if value.kind() == ValueKind::Map {
        // A list (of pairs) per entry for `items`, `keys`, `values`.
        pay_for(state, value.len().unwrap_or(0).saturating_mul(96))?;
        return match method {
            "get" => {
                let key = args.first().cloned().unwrap_or_default();
                let v = value.get_item(&key)?;
                Ok(if v.is_undefined() { args.get(1).cloned().unwrap_or_default() } else { v })
            }
            "items" => Ok(Value::from(
                value
                    .try_iter()?
                    .map(|k| Value::from(vec![k.clone(), value.get_item(&k).unwrap_or_default()]))
                    .collect::<Vec<_>>(),
            )),
            "keys" => Ok(Value::from(value.try_iter()?.collect::<Vec<_>>())),
            "values" => {
                Ok(Value::from(value.try_iter()?.map(|k| value.get_item(&k).unwrap_or_default()).collect::<Vec<_>>()))
            }
            _ => Err(JinjaError::new(ErrorKind::UnknownMethod, format!("dict has no method {method}"))),
        };
    }
    Err(JinjaError::new(ErrorKind::UnknownMethod, format!("{} has no method {method}", value.kind())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-Instruct's template (ChatML, with a default system prompt).
    const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    /// Gemma's template: the system prompt folded into the first user turn, `model` for the assistant.
    const GEMMA: &str = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set first_user_prefix = messages[0]['content'] + '\n\n' %}{% set loop_messages = messages[1:] %}{% else %}{% set first_user_prefix = \"\" %}{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = \"model\" %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";

    #[test]
    fn chatml_and_gemma_templates_render_as_their_models_expect() {
        let t = ChatTemplate::new("test", CHATML, "", "<|im_end|>").unwrap();
        let msgs =
            [ChatMessage::new("user", "Hi!"), ChatMessage::new("assistant", "Hello."), ChatMessage::new("user", "Bye")];
        let out = t.render(&msgs, true).unwrap();
        assert!(out.starts_with("<|im_start|>system\nYou are a helpful AI assistant named SmolLM"), "{out}");
        assert!(out.ends_with("<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"), "{out}");
        let g = ChatTemplate::new("test", GEMMA, "<bos>", "<eos>").unwrap();
        let msgs = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", " Hi! ")];
        assert_eq!(
            g.render(&msgs, true).unwrap(),
            "<bos><start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n<start_of_turn>model\n"
        );
        let err = g.render(&[ChatMessage::new("assistant", "x")], true).unwrap_err().to_string();
        assert!(err.contains("alternate"), "raise_exception reaches the caller: {err}");
    }

    /// Renders `template` (named as a GGUF's) and returns the error.
    fn render_err(template: &str) -> String {
        let source = "m.gguf (tokenizer.chat_template)";
        let t = ChatTemplate::new(source, template, "", "").unwrap();
        let started = std::time::Instant::now();
        let err = t.render(&[ChatMessage::new("user", "hi")], true).unwrap_err().to_string();
        assert!(started.elapsed().as_secs() < 30, "{template}: took {:?}", started.elapsed());
        assert!(err.contains(source), "the error names the template: {err}");
        err
    }

    #[test]
    fn templates_that_loop_end_on_fuel() {
        // 10^10 iterations without fuel.
        let err = render_err("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}");
        assert!(err.contains("ran out of fuel"), "{err}");
        // A string doubled 64 times (2^65 bytes) is refused before it is made.
        let err = render_err(
            "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        );
        assert!(err.contains("ran out of fuel"), "{err}");
        // A Python method asked for 10^12 bytes pays for them first.
        let err = render_err("{% set s = 'a' * 1000000 %}{{ s.replace('a', 'b' * 1000000) }}");
        assert!(err.contains("ran out of fuel"), "{err}");
    }

    #[test]
    fn a_template_minijinja_panics_on_is_an_error() {
        // minijinja 3.1 divides by the number of `loop.cycle`'s arguments.
        for template in [
            "{% for m in messages %}{{ loop.cycle() }}{% endfor %}",
            "{% set e = [] %}{% for m in messages %}{{ loop.cycle(*e) }}{% endfor %}",
        ] {
            let err = render_err(template);
            assert!(err.contains("minijinja failed on it"), "{template}: {err}");
        }
    }

    #[test]
    fn output_past_the_cap_is_an_error() {
        // 100 GB of output without the cap (a short chat's fuel pays for
        // 16 MiB of data, so the cap is lowered below that).
        let limits = Limits { max_template_output: 1 << 20, ..Limits::DEFAULT };
        let t = ChatTemplate::with_limits(
            "chat.jinja",
            "{% set s = 'x' * 100000 %}{% for i in range(100000) %}{{ s }}{% endfor %}",
            "",
            "",
            &limits,
        )
        .unwrap();
        let err = t.render(&[ChatMessage::new("user", "hi")], true).unwrap_err().to_string();
        assert!(err.contains("grew past"), "{err}");
        let limits = Limits { max_template_output: 10, ..Limits::DEFAULT };
        let t = ChatTemplate::with_limits("chat.jinja", "{{ messages[0]['content'] }}", "", "", &limits).unwrap();
        assert_eq!(t.render(&[ChatMessage::new("user", "0123456789")], false).unwrap(), "0123456789");
        let err = t.render(&[ChatMessage::new("user", "0123456789!")], false).unwrap_err().to_string();
        assert!(err.contains("chat.jinja") && err.contains("10 bytes"), "{err}");
    }

    #[test]
    fn range_follows_python_and_never_overflows() {
        let t = |src: &str| ChatTemplate::new("t", src, "", "").unwrap().render(&[], false);
        assert_eq!(t("{{ range(3) | list }}").unwrap(), "[0, 1, 2]");
        assert_eq!(t("{{ range(1, 7, 2) | list }}").unwrap(), "[1, 3, 5]");
        assert_eq!(t("{{ range(5, 0, -2) | list }}").unwrap(), "[5, 3, 1]");
        assert_eq!(t("{{ range(0, 5, -1) | list }}|{{ range(-3) | list }}").unwrap(), "[]|[]");
        // Found by fuzzing: minijinja's own range negated i64::MIN and
        // overflowed adding a negative step to the span.
        for src in [
            "{{ range(0, 1, -9223372036854775808) | list }}",
            "{{ range(9223372036854775807, -9223372036854775808, -9223372036854775808) | list }}",
        ] {
            assert!(t(src).is_ok(), "{src}");
        }
        let err = t("{{ range(9223372036854775807, -9223372036854775808, -2) | list }}").unwrap_err().to_string();
        assert!(err.contains("too many elements"), "{err}");
        assert!(t("{{ range(1, 2, 0) }}").unwrap_err().to_string().contains("step of 0"));
    }

    #[test]
    fn template_files_are_regular_files() {
        let scratch = tempfile::Builder::new().prefix("gantry-chat-template-").tempdir().unwrap();
        let dir = scratch.path().to_owned();
        let err = ChatTemplate::from_file(&dir, "", "").unwrap_err().to_string();
        assert!(err.contains(&dir.display().to_string()) && err.contains("folder"), "{err}");
        // A template is not a model: the error says which file it is.
        assert!(err.contains("chat template") && !err.contains("model file"), "{err}");
        let file = dir.join("t.jinja");
        std::fs::write(&file, "{{ messages[0]['content'] }}").unwrap();
        let t = ChatTemplate::from_file(&file, "", "").unwrap();
        assert_eq!(t.render(&[ChatMessage::new("user", "hi")], false).unwrap(), "hi");
        let err = ChatTemplate::from_file(&dir.join("none.jinja"), "", "").unwrap_err().to_string();
        assert!(err.contains("none.jinja"), "{err}");
    }

    #[test]
    fn strftime_follows_python_in_utc() {
        // Expected strings from Python's time.strftime(fmt, time.gmtime(t)).
        let fmt = "%Y|%y|%m|%d|%e|%j|%H|%I|%M|%S|%p|%b|%B|%a|%A|%%|%Q";
        for (t, want) in [
            (0, "1970|70|01|01| 1|001|00|12|00|00|AM|Jan|January|Thu|Thursday|%|%Q"),
            (1_796_599_186, "2026|26|12|06| 6|340|23|11|19|46|PM|Dec|December|Sun|Sunday|%|%Q"),
            (951_829_261, "2000|00|02|29|29|060|13|01|01|01|PM|Feb|February|Tue|Tuesday|%|%Q"),
            (4_107_542_399, "2100|00|02|28|28|059|23|11|59|59|PM|Feb|February|Sun|Sunday|%|%Q"),
        ] {
            assert_eq!(strftime(fmt, t), want, "{t}");
        }
        let t =
            ChatTemplate::new("t", "{{ strftime_now('%Y-%m-%d') }}|{{ date_string }}|{{ datetime }}", "", "").unwrap();
        t.set_time(Some(1_796_599_186));
        assert_eq!(t.render(&[], false).unwrap(), "2026-12-06|06 Dec 2026|Dec 06 2026");
    }

    #[test]
    fn messages_are_adjusted_as_llama_cpp_adjusts_them() {
        // Gemma 2 refuses a system message: it goes into the first user turn.
        let gemma2 = "{{ bos_token }}{% if messages and messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}";
        let t = ChatTemplate::new("t", gemma2, "<bos>", "").unwrap();
        let msgs = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")];
        assert_eq!(t.render(&msgs, true).unwrap(), "<bos><user>Be brief.\nHi");
        assert_eq!(t.render(&msgs[..1], true).unwrap(), "<bos>");
        // A template that shows system messages gets them as they are; `developer` is `system`.
        let shows = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ m.reasoning_content }}{% endfor %}{% if add_generation_prompt is defined %}defined{% endif %}";
        let t = ChatTemplate::new("t", shows, "", "").unwrap();
        let msgs =
            [ChatMessage::new("developer", "Be brief."), ChatMessage::new("assistant", "4").with_reasoning("2+2")];
        assert_eq!(t.render(&msgs, false).unwrap(), "<system>Be brief.<assistant>42+2");
        assert!(t.render(&msgs, true).unwrap().ends_with("2+2defined"));
        // gpt-oss (a template with `<|channel|>`) keeps `developer` and reads `thinking`.
        let harmony = "{% for m in messages %}<|channel|>{{ m.role }}:{{ m.thinking }}{% endfor %}";
        let t = ChatTemplate::new("t", harmony, "", "").unwrap();
        assert_eq!(t.render(&msgs, true).unwrap(), "<|channel|>developer:<|channel|>assistant:2+2");
    }

    #[test]
    fn python_methods_and_parse_errors() {
        let t = ChatTemplate::new("t", "{{ messages[0]['content'].strip().upper() }}|{{ 'a,b'.split(',') | length }}|{{ messages[0].get('role') }}|{{ strftime_now('%d %b %Y') | length }}", "", "").unwrap();
        assert_eq!(t.render(&[ChatMessage::new("user", "  hi ")], false).unwrap(), "HI|2|user|11");
        let err = ChatTemplate::new("m.gguf (tokenizer.chat_template)", "{% for %}", "", "").unwrap_err().to_string();
        assert!(err.contains("m.gguf") && err.contains("tokenizer.chat_template"), "{err}");
    }
}
