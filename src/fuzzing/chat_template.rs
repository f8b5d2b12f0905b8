//! Chat templates through Gantry's renderer ([`ChatTemplate`]): templates
//! drawn from a small grammar of the Jinja that chat templates use — text,
//! `{{ }}` expressions over the messages and their fields, `for` loops
//! (nested, over ranges of any size, with `break` and `continue`), `if`,
//! `set`, macros (recursive ones too), filters, string repetition and
//! concatenation, Python string methods, `raise_exception` — with the
//! conversation chosen too (roles, contents, `add_generation_prompt`), then
//! compiled and rendered.
//!
//! What must hold ([`run`] returns an `Err` naming what broke): compiling and
//! rendering are `Ok` or an error, and a rendered prompt is at most
//! [`MAX_OUTPUT`] bytes. A panic, an abort, a hang (libFuzzer's `-timeout`)
//! or unbounded memory is a finding too.

use arbitrary::{Result as ArbResult, Unstructured};

use super::Outcome;
use crate::model::chat_template::{ChatMessage, ChatTemplate};

/// The most bytes a rendered prompt may have: far above any real chat
/// template's prompt, far below what would exhaust memory.
pub const MAX_OUTPUT: usize = 64 << 20;

/// Literal text between tags.
const TEXTS: [&str; 10] = ["<|im_start|>", "<|im_end|>\n", "\n", "[INST] ", " [/INST]", "x", "{", "}", "%", "é🦙"];
/// Integers in expressions: loop bounds, repetition counts, indices, widths.
const INTS: [&str; 12] = [
    "0",
    "1",
    "2",
    "3",
    "-1",
    "10",
    "100",
    "1000",
    "100000",
    "2147483647",
    "9223372036854775807",
    "-9223372036854775808",
];
/// String literals.
const STRINGS: [&str; 6] = ["''", "'a'", "'ab'", "'user'", "'\\n'", "'{{ x }}'"];
/// Message fields a template reads.
const FIELDS: [&str; 5] = ["role", "content", "tool_calls", "name", "missing"];
/// Filters, each with its arguments.
const FILTERS: [&str; 22] = [
    "upper",
    "lower",
    "trim",
    "length",
    "string",
    "tojson",
    "list",
    "reverse",
    "first",
    "last",
    "int",
    "float",
    "abs",
    "join(',')",
    "replace('a', 'aa')",
    "center(1000)",
    "indent(100000)",
    "default('d')",
    "title",
    "capitalize",
    "batch(2)",
    "items",
];
/// Python string methods (the renderer's unknown-method callback).
const METHODS: [&str; 8] = [
    "strip()",
    "lstrip('a')",
    "rstrip()",
    "startswith('a')",
    "endswith('')",
    "split(',')",
    "upper()",
    "replace('', 'x')",
];
/// The roles of messages.
const ROLES: [&str; 6] = ["system", "user", "assistant", "tool", "", "<|im_end|>"];
/// Pieces of message contents.
const CONTENT_PIECES: [&str; 8] = ["hi", " ", "\n", "{{ 1 }}", "{% for %}", "é", "a", "<|im_end|>"];

/// Runs one input; `Err` names the invariant it broke.
pub fn run(data: &[u8]) -> Result<Outcome, String> {
    let mut u = Unstructured::new(data);
    let Ok((source, messages, add_generation_prompt)) = build(&mut u) else {
        return Ok(Outcome::Refused("the bytes ran out while building".into()));
    };
    let template = match ChatTemplate::new("fuzz", &source, "<s>", "</s>") {
        Ok(t) => t,
        Err(e) => return Ok(Outcome::Refused(e.to_string())),
    };
    match template.render(&messages, add_generation_prompt) {
        Ok(out) if out.len() <= MAX_OUTPUT => Ok(Outcome::Ran),
        Ok(out) => Err(format!("a prompt of {} bytes from {source:?}", out.len())),
        Err(e) => Ok(Outcome::FailedToRun(e.to_string())),
    }
}

/// The template and conversation `data` decodes to, for triaging a kept
/// input (the fuzz target prints it with `GANTRY_FUZZ_VERBOSE=1`); `None`
/// when the bytes run out while building.
pub fn describe(data: &[u8]) -> Option<String> {
    let (source, messages, add_generation_prompt) = build(&mut Unstructured::new(data)).ok()?;
    Some(format!("template: {source:?}\nmessages: {messages:?}\nadd_generation_prompt: {add_generation_prompt}"))
}

/// The template's text, the conversation and `add_generation_prompt`.
fn build(u: &mut Unstructured<'_>) -> ArbResult<(String, Vec<ChatMessage>, bool)> {
    let mut g = Grammar { out: String::new(), loops: 0, vars: vec!["message"], macros: 0 };
    if u.int_in_range(0u8..=3)? == 3 {
        g.out.push_str("{{ bos_token }}");
    }
    let n = u.int_in_range(1..=4)?;
    for _ in 0..n {
        g.statement(u, 3)?;
    }
    let mut messages = Vec::new();
    for _ in 0..u.int_in_range(1..=4)? {
        let role = ROLES[u.choose_index(ROLES.len())?];
        let mut content = String::new();
        for _ in 0..u.int_in_range(0..=6)? {
            content.push_str(CONTENT_PIECES[u.choose_index(CONTENT_PIECES.len())?]);
        }
        messages.push(ChatMessage::new(role, &content));
    }
    let source = if g.out.is_empty() { "{% for m in messages %}{{ m.content }}{% endfor %}".into() } else { g.out };
    Ok((source, messages, u.arbitrary()?))
}

/// A template being written: its text and what is in scope.
struct Grammar {
    out: String,
    /// Loops open around the current point (`break`, `continue` and `loop` need one).
    loops: usize,
    /// Variables in scope.
    vars: Vec<&'static str>,
    /// Macros defined so far (`m0`, `m1`, ...).
    macros: usize,
}

impl Grammar {
    /// One statement; `depth` bounds the nesting.
    fn statement(&mut self, u: &mut Unstructured<'_>, depth: u32) -> ArbResult<()> {
        let choice = if depth == 0 { u.int_in_range(0u8..=1)? } else { u.int_in_range(0u8..=9)? };
        match choice {
            0 => self.out.push_str(TEXTS[u.choose_index(TEXTS.len())?]),
            1 => {
                let ws = *u.choose(&["", "-"])?;
                self.out.push_str(&format!("{{{{{ws} "));
                self.expr(u, 2)?;
                self.out.push_str(&format!(" {ws}}}}}"));
            }
            2 | 3 => {
                let var = *u.choose(&["message", "i", "x"])?;
                self.out.push_str(&format!("{{% for {var} in "));
                self.iterable(u)?;
                if u.int_in_range(0u8..=7)? == 7 {
                    self.out.push_str(" if ");
                    self.expr(u, 1)?;
                }
                self.out.push_str(" %}");
                self.loops += 1;
                self.vars.push(var);
                for _ in 0..u.int_in_range(1..=3)? {
                    self.statement(u, depth - 1)?;
                }
                self.vars.pop();
                self.loops -= 1;
                if u.int_in_range(0u8..=7)? == 7 {
                    self.out.push_str("{% else %}");
                    self.statement(u, depth - 1)?;
                }
                self.out.push_str("{% endfor %}");
            }
            4 => {
                self.out.push_str("{% if ");
                self.expr(u, 2)?;
                self.out.push_str(" %}");
                self.statement(u, depth - 1)?;
                if u.arbitrary()? {
                    self.out.push_str("{% elif ");
                    self.expr(u, 1)?;
                    self.out.push_str(" %}");
                    self.statement(u, depth - 1)?;
                }
                if u.arbitrary()? {
                    self.out.push_str("{% else %}");
                    self.statement(u, depth - 1)?;
                }
                self.out.push_str("{% endif %}");
            }
            5 => {
                let var = *u.choose(&["x", "ns.n"])?;
                if var == "ns.n" {
                    self.out.push_str("{% set ns = namespace(n=0) %}");
                }
                self.out.push_str(&format!("{{% set {var} = "));
                self.expr(u, 2)?;
                self.out.push_str(" %}");
                self.vars.push("x");
            }
            6 => {
                // A macro, called once or more; it may call itself (unbounded recursion).
                let name = format!("m{}", self.macros);
                self.macros += 1;
                self.out.push_str(&format!("{{% macro {name}(x, n=0) %}}"));
                self.vars.push("x");
                self.statement(u, depth - 1)?;
                if u.int_in_range(0u8..=3)? == 3 {
                    self.out.push_str(&format!("{{{{ {name}(x ~ x, n + 1) }}}}"));
                }
                self.vars.pop();
                self.out.push_str("{% endmacro %}");
                for _ in 0..u.int_in_range(1..=2)? {
                    self.out.push_str(&format!("{{{{ {name}("));
                    self.expr(u, 1)?;
                    self.out.push_str(") }}");
                }
            }
            7 if self.loops > 0 => self.out.push_str(u.choose(&["{% break %}", "{% continue %}"])?),
            7 => self.out.push_str("{{ raise_exception('Conversation roles must alternate') }}"),
            8 => {
                // A filter block, or the raw text of a tag.
                if u.arbitrary()? {
                    let filter = FILTERS[u.choose_index(FILTERS.len())?];
                    self.out.push_str(&format!("{{% filter {filter} %}}"));
                    self.statement(u, depth - 1)?;
                    self.out.push_str("{% endfilter %}");
                } else {
                    self.out.push_str("{% raw %}{{ x }}{% endraw %}");
                }
            }
            _ => {
                // What Hugging Face templates open with: the system message split off.
                self.out.push_str(
                    "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}\
                     {% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = messages %}{% endif %}",
                );
                self.statement(u, depth - 1)?;
            }
        }
        Ok(())
    }

    /// What a `for` loops over.
    fn iterable(&mut self, u: &mut Unstructured<'_>) -> ArbResult<()> {
        match u.int_in_range(0u8..=6)? {
            0 | 1 => self.out.push_str("messages"),
            2 => {
                let (a, b) = (INTS[u.choose_index(INTS.len())?], INTS[u.choose_index(INTS.len())?]);
                match u.int_in_range(0u8..=2)? {
                    0 => self.out.push_str(&format!("range({a})")),
                    1 => self.out.push_str(&format!("range({a}, {b})")),
                    _ => self.out.push_str(&format!("range({a}, {b}, {})", INTS[u.choose_index(INTS.len())?])),
                }
            }
            3 => self.out.push_str(&format!("messages[{}:]", INTS[u.choose_index(INTS.len())?])),
            4 => {
                self.out.push('(');
                self.expr(u, 1)?;
                self.out.push_str(")|list");
            }
            5 => self.out.push_str("messages|reverse"),
            _ => {
                self.out.push_str(STRINGS[u.choose_index(STRINGS.len())?]);
                self.out.push_str(&format!(" * {}", INTS[u.choose_index(INTS.len())?]));
            }
        }
        Ok(())
    }

    /// One expression; `depth` bounds the nesting.
    fn expr(&mut self, u: &mut Unstructured<'_>, depth: u32) -> ArbResult<()> {
        let choice = if depth == 0 { u.int_in_range(0u8..=4)? } else { u.int_in_range(0u8..=12)? };
        match choice {
            0 => self.out.push_str(STRINGS[u.choose_index(STRINGS.len())?]),
            1 => self.out.push_str(INTS[u.choose_index(INTS.len())?]),
            2 => {
                let var = self.vars[u.choose_index(self.vars.len())?];
                let field = FIELDS[u.choose_index(FIELDS.len())?];
                self.out.push_str(&format!("{var}['{field}']"));
            }
            3 => self.out.push_str(u.choose(&[
                "bos_token",
                "eos_token",
                "add_generation_prompt",
                "messages",
                "undefined_name",
                "none",
            ])?),
            4 => {
                let i = INTS[u.choose_index(INTS.len())?];
                let field = FIELDS[u.choose_index(FIELDS.len())?];
                self.out.push_str(&format!("messages[{i}].{field}"));
            }
            5 => {
                // String (or list) repetition by any count.
                self.out.push('(');
                self.expr(u, depth - 1)?;
                self.out.push_str(&format!(") * {}", INTS[u.choose_index(INTS.len())?]));
            }
            6 => {
                self.out.push('(');
                self.expr(u, depth - 1)?;
                self.out
                    .push_str(u.choose(&[" ~ ", " + ", " - ", " / ", " // ", " % ", " ** ", " == ", " and ", " in "])?);
                self.expr(u, depth - 1)?;
                self.out.push(')');
            }
            7 | 8 => {
                self.out.push('(');
                self.expr(u, depth - 1)?;
                self.out.push_str(&format!(")|{}", FILTERS[u.choose_index(FILTERS.len())?]));
            }
            9 => {
                self.out.push('(');
                self.expr(u, depth - 1)?;
                self.out.push_str(&format!(").{}", METHODS[u.choose_index(METHODS.len())?]));
            }
            10 if self.loops > 0 => self.out.push_str(u.choose(&[
                "loop.index",
                "loop.first",
                "loop.last",
                "loop.length",
                "loop.cycle('a', 'b')",
            ])?),
            10 => self.out.push_str("raise_exception('x')"),
            11 => {
                self.out.push_str("range(");
                self.out.push_str(INTS[u.choose_index(INTS.len())?]);
                self.out.push_str(")|join");
            }
            _ => {
                self.out.push_str("strftime_now('%d %b %Y') if ");
                self.expr(u, depth - 1)?;
                self.out.push_str(" else ");
                self.expr(u, depth - 1)?;
            }
        }
        Ok(())
    }
}

/// Inputs the fuzzer starts from, by name (what `fuzz/seeds/chat_template`
/// holds): templates that compile and render.
pub fn seed_inputs() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("text-only", Vec::new()),
        // A loop over the messages printing each role's field.
        ("loop-over-messages", vec![0, 0, 2, 0, 0, 0, 1, 2, 2, 0]),
        // Hugging Face's opening: the system message split off, over a system
        // and a user message (a template that never shows the system message
        // gets it merged into the user's, as llama.cpp does; alone, it would be
        // dropped and the template index an empty conversation).
        ("system-split", vec![0, 0, 9, 0, 0, 1, 0, 0, 1, 0, 1]),
    ]
}
