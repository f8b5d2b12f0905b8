//! Constrained decoding (feature `grammar`): a reply that must follow a JSON
//! schema (or be any JSON object) gets, at each step, the set of tokens
//! that keep it valid, computed by `llguidance` — the library llama.cpp and
//! vLLM use — over a token trie of the model's vocabulary. Tokens outside
//! the set get a logit of −∞ before sampling; once the grammar is complete
//! only the end-of-generation token remains.
//!
//! ```no_run
//! # fn demo(tokenizer: std::sync::Arc<gantry::model::tokenizer::Tokenizer>, logits: &mut [f32]) -> gantry::Result<()> {
//! use gantry::model::grammar::{Constraint, GrammarVocab};
//! let vocab = GrammarVocab::new(tokenizer)?; // once per model
//! let schema = serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}});
//! let mut constraint = Constraint::json_schema(&vocab, &schema)?; // once per reply
//! constraint.mask(logits)?; // each step, before sampling
//! # let token = 0;
//! constraint.accept(token)?; // the chosen token
//! # Ok(()) }
//! ```

mod numbers;
mod schema_objects;

pub use schema_objects::for_each_schema_object;

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenizerEnv};

use crate::model::tokenizer::{TokenAttr, Tokenizer};
use crate::{Error, Result};

/// The model's vocabulary as `llguidance` reads it, and its parser factory:
/// built once per model (a trie of every token's bytes).
#[derive(Clone)]
pub struct GrammarVocab {
    factory: Arc<ParserFactory>,
}

impl std::fmt::Debug for GrammarVocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarVocab").finish_non_exhaustive()
    }
}

/// `llguidance`'s view of a Gantry tokenizer.
struct VocabEnv {
    tokenizer: Arc<Tokenizer>,
    trie: TokTrie,
}

impl TokenizerEnv for VocabEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        // The bytes a grammar forces continue the reply: text is tokenized
        // without a SentencePiece vocabulary's leading space (its `▁` had
        // become the forced bytes' first token, which the grammar refused).
        // They may also stop or start inside a character (an emoji's first
        // bytes, the rest of one a token began): those bytes are tokenized
        // by the trie, each the token of exactly those bytes (byte-level and
        // byte-fallback vocabularies have them). Read as lossy text they had
        // become U+FFFD's tokens, which the grammar refused too.
        let mut tokens = Vec::new();
        for chunk in s.utf8_chunks() {
            if !chunk.valid().is_empty() {
                tokens.extend(self.tokenizer.encode_continuation(chunk.valid()).unwrap_or_default());
            }
            tokens.extend(self.trie.greedy_tokenize(chunk.invalid()));
        }
        tokens
    }
}

/// The longest token (in bytes, a special token's marker included) that
/// llguidance's token trie holds.
const MAX_TOKEN_BYTES: usize = 1024;

impl GrammarVocab {
    /// The vocabulary of `tokenizer`. Control tokens are written as
    /// `llguidance`'s special tokens (never produced by a grammar's text);
    /// the end-of-generation token is the tokenizer's EOS (else its first
    /// end-of-generation token).
    pub fn new(tokenizer: Arc<Tokenizer>) -> Result<Self> {
        let n_vocab = tokenizer.n_vocab();
        let eos = tokenizer
            .eos()
            .or_else(|| tokenizer.eog_tokens().first().copied())
            .ok_or_else(|| Error::Model("constrained decoding needs an end-of-generation token".into()))?;
        let mut words = Vec::with_capacity(n_vocab);
        for id in 0..n_vocab as u32 {
            let token = tokenizer.token(id)?;
            let special = token.attr.intersects(TokenAttr::CONTROL.with(TokenAttr::UNKNOWN)) || tokenizer.is_eog(id);
            let piece = tokenizer.token_to_piece(id, true)?;
            words.push(if special {
                let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                w.extend_from_slice(piece);
                w
            } else {
                piece.to_vec()
            });
        }
        // llguidance's token trie holds tokens of at most 1,024 bytes (a
        // longer one fails an assertion inside it: a panic).
        if let Some((id, w)) = words.iter().enumerate().find(|(_, w)| w.len() > MAX_TOKEN_BYTES) {
            return Err(Error::Model(format!(
                "constrained decoding cannot use this vocabulary: token {id} is {} bytes, llguidance holds tokens of \
                 at most {MAX_TOKEN_BYTES}",
                w.len()
            )));
        }
        let n = u32::try_from(n_vocab).map_err(|_| Error::Model("the vocabulary is too large".into()))?;
        let info = TokRxInfo { tok_bos: tokenizer.bos(), ..TokRxInfo::new(n, eos) };
        // Any other vocabulary llguidance cannot index is an error too.
        let trie = std::panic::catch_unwind(|| TokTrie::from(&info, &words)).map_err(|panic| {
            Error::Model(format!(
                "constrained decoding cannot use this vocabulary: llguidance failed on it ({})",
                crate::model::caught_panic::message(&*panic)
            ))
        })?;
        let env: TokEnv = Arc::new(VocabEnv { tokenizer, trie });
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| grammar_error("the vocabulary", e))?;
        factory.quiet();
        Ok(Self { factory: Arc::new(factory) })
    }
}

/// llguidance's message, without the dump of its parser's state that
/// follows it (`<state>` and a screenful of counters, for its developers).
fn grammar_error(what: &str, e: impl std::fmt::Display) -> Error {
    let message = e.to_string();
    // llguidance appends its parser state and, for a panic it caught (an
    // assertion on a grammar too large), a backtrace: neither helps the
    // schema's author, and a server must not send them to its clients.
    let message = message.split("\n<state>").next().unwrap_or_default();
    let message = message.split("<backtrace>").next().unwrap_or_default().trim_end();
    Error::Model(format!("{what}: {message}"))
}

/// The most JSON values (objects, arrays, strings, numbers, …) a schema may
/// hold: the longest chain llguidance's compile recurses through is at most
/// one value deep each, so this bounds its stack (see [`COMPILE_STACK_BYTES`]).
/// Tool lists of a hundred functions hold a few thousand.
pub const MAX_SCHEMA_VALUES: usize = 1 << 15;

/// The stack of the thread that compiles a schema, for the deepest chain
/// [`MAX_SCHEMA_VALUES`] allow: a chain of 16,380 bare `$ref`s (the longest
/// within the bound) overflowed 48 MiB and compiled in 128 MiB (llguidance
/// 1.9, release build), so twice that. Only the pages a compile touches
/// are committed.
const COMPILE_STACK_BYTES: usize = 256 << 20;

/// The most object properties a schema may declare, all its objects
/// together (OpenAI's bound for structured outputs). llguidance's compile
/// grows faster than the properties of an object (optional ones: 1,000 in
/// 0.9 s, 5,000 in 5 s, 8,000 in 19 s, 16,000 in 28 s and then refused, on
/// one Zen 4 core), and a compile cannot be stopped once begun: a server
/// runs it to its end even when the client has gone, so this bounds what
/// one request can cost.
pub const MAX_SCHEMA_PROPERTIES: usize = 5_000;

/// The most `patternProperties` a schema may declare, all its objects
/// together: each is a regular expression over the keys, and llguidance's
/// compile grows about as their count to the power 2.3 (250 in 2–5 s,
/// 500 in 26 s, 1,000 past a minute here).
pub const MAX_SCHEMA_PATTERN_PROPERTIES: usize = 100;

/// How many JSON values `v` holds, how many properties its objects declare
/// (the entries of every `"properties"` object) and how many pattern
/// properties, the walk stopped once one passes its bound
/// ([`MAX_SCHEMA_VALUES`], [`MAX_SCHEMA_PROPERTIES`],
/// [`MAX_SCHEMA_PATTERN_PROPERTIES`]).
fn schema_size(v: &serde_json::Value) -> (usize, usize, usize) {
    let (mut values, mut properties, mut pattern_properties) = (0, 0, 0usize);
    let mut pending = vec![v];
    while let Some(v) = pending.pop() {
        values += 1;
        if values > MAX_SCHEMA_VALUES
            || properties > MAX_SCHEMA_PROPERTIES
            || pattern_properties > MAX_SCHEMA_PATTERN_PROPERTIES
        {
            break;
        }
        match v {
            serde_json::Value::Array(items) => pending.extend(items),
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::Object(declared)) = map.get("properties") {
                    properties += declared.len();
                }
                if let Some(serde_json::Value::Object(patterns)) = map.get("patternProperties") {
                    pattern_properties += patterns.len();
                }
                pending.extend(map.values());
            }
            _ => {}
        }
    }
    (values, properties, pattern_properties)
}

/// The whitespace a JSON reply may put between tokens (see [`Constraint::json_schema`]).
const JSON_WHITESPACE: &str = r"(\x20|\x0A{1,2}[\x20\x09]{0,20})";

/// One reply's grammar state.
pub struct Constraint {
    matcher: Matcher,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint").finish_non_exhaustive()
    }
}

impl Constraint {
    /// A reply that is a JSON value valid under `schema`; an error says why
    /// the schema cannot be compiled.
    ///
    /// Whitespace between JSON tokens is bounded as llama.cpp's JSON grammars
    /// bound it (a space, or one or two newlines and up to 20 spaces or tabs),
    /// so that a model cannot fill a reply with blanks; a schema's own
    /// `x-guidance` options replace this.
    ///
    /// Before llguidance compiles it, a copy of the schema is checked and
    /// rewritten where llguidance would let through replies the schema
    /// forbids: a nested `$id` or an anchor declared twice is refused
    /// (`schema_objects`), and its numbers are held to what a float reader
    /// of the reply sees (`numbers`: exclusive bounds, decimal steps,
    /// numbers a float does not hold).
    pub fn json_schema(vocab: &GrammarVocab, schema: &serde_json::Value) -> Result<Self> {
        let (values, properties, patterns) = schema_size(schema);
        if values > MAX_SCHEMA_VALUES {
            return Err(Error::Model(format!("the JSON schema holds more than {MAX_SCHEMA_VALUES} values")));
        }
        if properties > MAX_SCHEMA_PROPERTIES {
            return Err(Error::Model(format!(
                "the JSON schema declares more than {MAX_SCHEMA_PROPERTIES} object properties (all its objects together)"
            )));
        }
        if patterns > MAX_SCHEMA_PATTERN_PROPERTIES {
            return Err(Error::Model(format!(
                "the JSON schema declares more than {MAX_SCHEMA_PATTERN_PROPERTIES} patternProperties (all its objects \
                 together): each is a regular expression llguidance's compile pays for many times over"
            )));
        }
        let mut schema = schema.clone();
        schema_objects::check_ids_and_anchors(&mut schema)?;
        numbers::prepare(&mut schema)?;
        if let Some(object) = schema.as_object_mut()
            && !object.contains_key("x-guidance")
        {
            object.insert("x-guidance".into(), serde_json::json!({"whitespace_pattern": JSON_WHITESPACE}));
        }
        Self::new(vocab, TopLevelGrammar::from_json_schema(schema), "the JSON schema")
    }

    /// A reply that is any JSON object (OpenAI's `json_object`).
    pub fn json_object(vocab: &GrammarVocab) -> Result<Self> {
        Self::json_schema(vocab, &serde_json::json!({"type": "object"}))
    }

    fn new(vocab: &GrammarVocab, grammar: TopLevelGrammar, what: &str) -> Result<Self> {
        // llguidance compiles a schema recursively, once per value along a
        // chain of nested values and `$ref`s (a chain of 1,000 `$ref`s
        // overflowed a 2 MiB thread): the compile runs on a thread whose
        // stack holds the deepest chain a schema within the value bound
        // can make.
        let factory = &vocab.factory;
        let parser = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("gantry-grammar".into())
                .stack_size(COMPILE_STACK_BYTES)
                .spawn_scoped(scope, move || factory.create_parser(grammar))
                .map_err(|e| Error::Model(format!("starting the grammar compile: {e}")))?
                .join()
                .map_err(|_| Error::Model(format!("{what}: the grammar compile panicked")))
        })?
        .map_err(|e| grammar_error(what, e))?;
        let mut matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(grammar_error(what, e));
        }
        // A grammar that allows no first token (a schema that only refers
        // to itself) fails here, once, rather than at the reply's first step.
        if let Err(e) = matcher.compute_mask_or_eos() {
            return Err(grammar_error(&format!("{what} allows no reply"), e));
        }
        Ok(Self { matcher })
    }

    /// Sets every token the grammar does not allow next to −∞ in `logits`
    /// (one position's, `[n_vocab]`).
    pub fn mask(&mut self, logits: &mut [f32]) -> Result<()> {
        let allowed = self.matcher.compute_mask_or_eos().map_err(|e| grammar_error("the grammar's next tokens", e))?;
        for (i, l) in logits.iter_mut().enumerate() {
            if !allowed.is_allowed(i as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    /// Advances the grammar by the chosen token.
    pub fn accept(&mut self, token: u32) -> Result<()> {
        if self.matcher.is_stopped() {
            return Ok(());
        }
        self.matcher.consume_token(token).map_err(|e| grammar_error("the grammar refused a token", e))
    }

    /// Whether the reply is complete (the grammar allows only the end).
    pub fn is_complete(&self) -> bool {
        self.matcher.is_stopped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schema whose `$ref`s chain through `n` definitions to an integer,
    /// each a bare `$ref` or, `nested`, an object whose property refers on.
    fn ref_chain(n: usize, nested: bool) -> serde_json::Value {
        let mut defs = serde_json::Map::new();
        for i in 0..n {
            let next = serde_json::json!({"$ref": format!("#/$defs/d{}", i + 1)});
            let def = if nested { serde_json::json!({"type": "object", "properties": {"a": next}}) } else { next };
            defs.insert(format!("d{i}"), def);
        }
        defs.insert(format!("d{n}"), serde_json::json!({"type": "integer"}));
        serde_json::json!({"$ref": "#/$defs/d0", "$defs": defs})
    }

    /// A SentencePiece vocabulary of the control tokens and the 256 bytes.
    fn vocab() -> GrammarVocab {
        vocab_with(&[]).unwrap()
    }

    /// [`vocab`] and the normal tokens `extra`.
    fn vocab_with(extra: &[String]) -> Result<GrammarVocab> {
        use crate::model::gguf::{Array, Gguf, GgufWriter};
        let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
        let mut types = vec![2, 3, 3];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
        }
        for t in extra {
            tokens.push(t.clone());
            types.push(1);
        }
        let mut w = GgufWriter::new();
        w.add_str("tokenizer.ggml.model", "llama");
        w.add_array("tokenizer.ggml.scores", Array::F32(vec![0.0; tokens.len()]));
        w.add_array("tokenizer.ggml.token_type", Array::I32(types));
        w.add_array("tokenizer.ggml.tokens", Array::String(tokens));
        let tokenizer = Tokenizer::from_gguf(&Gguf::parse(&w.to_bytes()).unwrap()).unwrap();
        GrammarVocab::new(Arc::new(tokenizer))
    }

    #[test]
    fn a_token_longer_than_llguidance_holds_is_an_error() {
        vocab_with(&["y".repeat(MAX_TOKEN_BYTES)]).unwrap();
        let e = vocab_with(&["y".repeat(MAX_TOKEN_BYTES + 1)]).err().unwrap().to_string();
        assert!(e.contains("token 259 is 1025 bytes"), "{e}");
    }

    #[test]
    fn the_longest_ref_chain_within_the_value_bound_compiles_and_a_longer_schema_is_refused() {
        let vocab = vocab();
        // A bare link is two values (its object and the `$ref` string), a nested one five.
        for (per_link, nested) in [(2, false), (5, true)] {
            // A nested link declares a property: those are bounded too.
            let links = if nested { MAX_SCHEMA_PROPERTIES } else { MAX_SCHEMA_VALUES / per_link - 4 };
            let longest = ref_chain(links, nested);
            assert!(schema_size(&longest).0 <= MAX_SCHEMA_VALUES);
            Constraint::json_schema(&vocab, &longest).unwrap();
        }
        let too_long = ref_chain(MAX_SCHEMA_VALUES, false);
        let e = Constraint::json_schema(&vocab, &too_long).unwrap_err().to_string();
        assert!(e.contains("more than 32768 values"), "{e}");
    }

    /// A schema's text is followed byte by byte by a SentencePiece
    /// byte-fallback vocabulary, characters of several bytes (an emoji)
    /// included: the bytes the grammar forces were tokenized with a leading
    /// `▁` and as lossy text (U+FFFD's bytes), which the grammar refused.
    #[test]
    fn characters_of_several_bytes_are_generated_as_their_bytes() {
        // The byte tokens, and `▁` (a space, as in every SentencePiece vocabulary).
        let vocab = vocab_with(&["▁".to_string()]).unwrap();
        for text in ["😀", "\u{800}", "café €"] {
            let schema = serde_json::json!({"type": "string", "const": text});
            let mut c = Constraint::json_schema(&vocab, &schema).unwrap();
            let mut bytes = Vec::new();
            while !c.is_complete() {
                assert!(bytes.len() < 64, "{text}: no end after {bytes:?}");
                let mut logits = vec![0.0f32; 260];
                c.mask(&mut logits).unwrap();
                // The first token the grammar allows past the control ones.
                let token = (3..260u32).find(|&t| logits[t as usize].is_finite()).expect("a token is allowed");
                c.accept(token).unwrap_or_else(|e| panic!("{text}: after {bytes:x?}, token {token}: {e}"));
                bytes.push(if token == 259 { b' ' } else { (token - 3) as u8 });
            }
            assert_eq!(String::from_utf8(bytes).unwrap(), format!("\"{text}\""));
        }
    }

    /// llguidance reads integer bounds as floats cast to `i64`: at −2^63 its
    /// range regex recursed until the stack overflowed (an abort, at any
    /// stack size), past ±2^63 it clamped them and let through replies the
    /// schema forbids. Such bounds are refused naming the key, wherever
    /// the integer schema is, used or not; bounds just inside compile.
    #[test]
    fn integer_bounds_outside_the_64_bit_range_are_refused_naming_the_key() {
        use serde_json::json;
        let vocab = vocab();
        let at_min = json!({"type": "integer", "minimum": -1e20, "maximum": -1e19});
        for (schema, key) in [
            (at_min.clone(), "minimum"),
            (
                json!({"type": "integer", "minimum": -9223372036854775807i64, "maximum": -9223372036854775807i64}),
                "minimum",
            ),
            (json!({"type": "integer", "exclusiveMaximum": -1e19}), "exclusiveMaximum"),
            (json!({"type": "integer", "minimum": 1e19, "maximum": 1e20}), "minimum"),
            (json!({"type": ["integer", "null"], "exclusiveMinimum": 1e308}), "exclusiveMinimum"),
            (json!({"type": "integer", "maximum": 9223372036854775807u64}), "maximum"),
            (json!({"type": "integer", "minimum": "a"}), "minimum"),
            (json!({"anyOf": [{"type": "string"}, at_min.clone()]}), "minimum"),
            (json!({"type": "array", "items": at_min, "maxItems": 0}), "minimum"),
            // A constant or an enumerated value is a range of one value.
            (json!({"type": "integer", "const": -1e20}), "const"),
            (json!({"type": "integer", "const": -9223372036854775807i64}), "const"),
            (json!({"type": "integer", "const": 1e20}), "const"),
            (json!({"type": ["integer", "string"], "enum": ["a", -1e20]}), "enum"),
            (json!({"anyOf": [{"type": "integer", "enum": [1, 1e19]}, {"type": "string"}]}), "enum"),
        ] {
            let e = Constraint::json_schema(&vocab, &schema).unwrap_err().to_string();
            assert!(e.contains(&format!("integer \"{key}\"")), "{schema}: {e}");
        }
        for schema in [
            json!({"type": "integer", "minimum": -9.2e18, "maximum": -9.1e18}),
            json!({"type": "integer", "minimum": -9223372036854774784i64, "maximum": -9223372036854774784i64}),
            json!({"type": "integer", "exclusiveMinimum": -9.2e18, "exclusiveMaximum": 9.2e18}),
            json!({"type": "integer", "const": -5}),
            json!({"type": ["integer", "string"], "enum": ["a", 7, -9.2e18]}),
        ] {
            Constraint::json_schema(&vocab, &schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
        }
        // A number's bounds are not an integer range: llguidance judges them.
        let number = json!({"type": "number", "minimum": -1e300});
        if let Err(e) = Constraint::json_schema(&vocab, &number) {
            assert!(!e.to_string().contains("magnitude below 2^63"), "{e}");
        }
    }

    /// Whether the constraint of `schema` allows the whole reply `text`,
    /// fed byte by byte through [`vocab`]'s byte tokens.
    fn allows(vocab: &GrammarVocab, schema: &serde_json::Value, text: &str) -> bool {
        let mut c = Constraint::json_schema(vocab, schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
        for &b in text.as_bytes() {
            let mut logits = vec![0.0f32; 259];
            if c.mask(&mut logits).is_err() || !logits[3 + usize::from(b)].is_finite() {
                return false;
            }
            c.accept(3 + u32::from(b)).unwrap();
        }
        c.is_complete()
    }

    /// A reply the constraint of `schema` allows, choosing at each byte
    /// the first of `preferred` the grammar allows.
    fn a_reply(vocab: &GrammarVocab, schema: &serde_json::Value, preferred: &str) -> String {
        let mut c = Constraint::json_schema(vocab, schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
        let mut reply = String::new();
        while !c.is_complete() {
            assert!(reply.len() < 64, "{schema}: no end after {reply}");
            let mut logits = vec![0.0f32; 259];
            c.mask(&mut logits).unwrap_or_else(|e| panic!("{schema}: after {reply}: {e}"));
            let b = preferred.bytes().find(|&b| logits[3 + usize::from(b)].is_finite());
            let b = b.unwrap_or_else(|| panic!("{schema}: after {reply}: none of {preferred} is allowed"));
            c.accept(3 + u32::from(b)).unwrap();
            reply.push(char::from(b));
        }
        reply
    }

    /// A number property's schema, inside an object so that a delimiter
    /// ends the number (where llguidance's hole was).
    fn number_property(number: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {"a": number}, "required": ["a"], "additionalProperties": false})
    }

    /// llguidance's number range let an integer-valued exclusive minimum
    /// through where the range ended before the next integer (`0` for
    /// `(0, 0.5)`, `-0` for `[-0.5, 0)`), and decimals past an exclusive
    /// bound that read back as the bound (`0.10000000000000001` for
    /// `(0.1, 1]`). No reply a range allows may read as a float outside
    /// it, one-sided or two, and a value well inside is allowed.
    #[test]
    fn a_number_reply_is_inside_its_exclusive_bounds_as_a_float() {
        use serde_json::json;
        let vocab = vocab();
        let candidates = [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "0.5",
            "0.25",
            "0.4999",
            "1",
            "1.0",
            "1.25",
            "1.5",
            "2",
            "2.5",
            "2.9",
            "10",
            "10.0",
            "10.25",
            "10.5",
            "-0.5",
            "-0.25",
            "-1",
            "-1.5",
            "0.00000000000000001",
            "0.1",
            "0.10000000000000001",
            "0.10000000000000002",
            "0.2",
            "0.000010000000000000001",
        ];
        for (lo, hi, inside) in [
            (0.0, 0.5, "0.25"),
            (0.0, 1e-40, "0.00000000000000000000000000000000000000001"),
            (10.0, 10.5, "10.25"),
            (1.0, 1.5, "1.25"),
            (2.0, 2.9, "2.5"),
            (-0.5, 0.0, "-0.25"),
            (-1.0, -0.5, "-0.75"),
            (0.1, 1.0, "0.5"),
            (0.00001, 1.0, "0.5"),
            (-1.5, 2.0, "1"),
        ] {
            let ranges = [
                (json!({"type": "number", "exclusiveMinimum": lo, "exclusiveMaximum": hi}), true, true),
                (json!({"type": "number", "exclusiveMinimum": lo, "maximum": hi}), true, false),
                (json!({"type": "number", "minimum": lo, "exclusiveMaximum": hi}), false, true),
                (json!({"type": "number", "minimum": lo, "exclusiveMinimum": true, "maximum": hi}), true, false),
            ];
            for (number, lo_excluded, hi_excluded) in ranges {
                let schema = number_property(number);
                let reads_inside = |v: f64| {
                    (if lo_excluded { v > lo } else { v >= lo }) && (if hi_excluded { v < hi } else { v <= hi })
                };
                for text in candidates.iter().chain([&inside]) {
                    let v: f64 = text.parse().unwrap();
                    if allows(&vocab, &schema, &format!("{{\"a\":{text}}}")) {
                        assert!(reads_inside(v), "{schema} allowed {text}");
                    }
                }
                assert!(allows(&vocab, &schema, &format!("{{\"a\":{inside}}}")), "{schema} refused {inside}");
            }
        }
        // One-sided bounds at zero.
        let above = number_property(json!({"type": "number", "exclusiveMinimum": 0}));
        let below = number_property(json!({"type": "number", "exclusiveMaximum": 0}));
        for text in ["0", "-0", "0.0", "-0.0", "-1"] {
            assert!(!allows(&vocab, &above, &format!("{{\"a\":{text}}}")), "{above} allowed {text}");
        }
        for text in ["0", "-0", "0.0", "-0.0", "1"] {
            assert!(!allows(&vocab, &below, &format!("{{\"a\":{text}}}")), "{below} allowed {text}");
        }
        assert!(allows(&vocab, &above, "{\"a\":0.5}") && allows(&vocab, &below, "{\"a\":-0.5}"));
        // Bounds as near zero as may be, on both sides of it, compile.
        let tiny = numbers::SMALLEST_BOUND;
        for number in [
            json!({"exclusiveMinimum": tiny, "exclusiveMaximum": 2.0 * tiny}),
            json!({"exclusiveMinimum": -2.0 * tiny, "exclusiveMaximum": -tiny}),
            json!({"minimum": -tiny, "exclusiveMaximum": 0}),
            json!({"exclusiveMinimum": 0, "maximum": tiny}),
        ] {
            let schema = number_property(number);
            Constraint::json_schema(&vocab, &schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
        }
        // No float lies strictly between a float and the next: an error, not a reply.
        let none = json!({"type": "number", "exclusiveMinimum": 0.1, "exclusiveMaximum": 0.10000000000000002});
        assert!(Constraint::json_schema(&vocab, &number_property(none)).is_err());
    }

    /// Two ways past the rewrite the twelfth probe pass found: a number
    /// schema reached only by a `$ref` to a place no keyword names (`#/x`),
    /// and a bound of 21 digits that serde_json's fast float parse read one
    /// float low (so the "next float" was the bound's own).
    #[test]
    fn a_number_schema_reached_by_ref_and_a_long_decimal_bound_hold() {
        let vocab = vocab();
        let by_ref = serde_json::json!({
            "type": "object", "properties": {"a": {"$ref": "#/x"}}, "required": ["a"], "additionalProperties": false,
            "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5},
        });
        assert!(!allows(&vocab, &by_ref, r#"{"a":0}"#) && allows(&vocab, &by_ref, r#"{"a":0.25}"#));
        let long: serde_json::Value = serde_json::from_str(
            r#"{"type": "object", "properties": {"a": {"type": "number", "exclusiveMinimum": 10.4557232330000003112,
                "maximum": 10.5}}, "required": ["a"], "additionalProperties": false}"#,
        )
        .unwrap();
        assert!(!allows(&vocab, &long, r#"{"a":10.455723233}"#) && allows(&vocab, &long, r#"{"a":10.46}"#));
    }

    /// A decimal `multipleOf` within bounds off its grid allowed nothing
    /// ("NoExtensionBias" mid-reply): each schema here has a reply, a
    /// multiple inside the bounds; one with none is an error.
    #[test]
    fn a_decimal_multiple_of_within_bounds_off_its_grid_has_a_reply() {
        use serde_json::json;
        let vocab = vocab();
        for (step, lo, hi) in [
            (0.1, 0.25, 0.35),
            (0.01, 0.015, 0.025),
            (0.1, 0.05, 0.15),
            (0.1, 1.25, 1.35),
            (0.1, -0.35, -0.25),
            (0.5, 0.75, 1.25),
            (0.05, 0.05, 0.35),
            (0.25, 0.1, 0.9),
            (0.1, 0.3, 0.3),
            (2.5, 1.0, 9.0),
            (0.1, 0.25, 10.35),
        ] {
            let schema = number_property(json!({"type": "number", "multipleOf": step, "minimum": lo, "maximum": hi}));
            let reply = a_reply(&vocab, &schema, "}{\"a:-.0123456789");
            let v: f64 = serde_json::from_str::<serde_json::Value>(&reply).unwrap()["a"].as_f64().unwrap();
            let k = (v / step).round();
            assert!(lo <= v && v <= hi && (v - k * step).abs() < 1e-9, "{schema}: {reply}");
        }
        let exclusive = number_property(
            json!({"type": "number", "multipleOf": 0.1, "exclusiveMinimum": 0.2, "exclusiveMaximum": 0.4}),
        );
        assert_eq!(a_reply(&vocab, &exclusive, "}{\"a:-.0123456789"), "{\"a\":0.3}");
        let none = number_property(json!({"type": "number", "multipleOf": 0.1, "minimum": 0.25, "maximum": 0.28}));
        assert!(Constraint::json_schema(&vocab, &none).is_err());
    }

    #[test]
    fn object_properties_past_the_bound_are_refused_before_the_compile() {
        let vocab = vocab();
        let object = |n: usize, first: usize| {
            let properties: serde_json::Map<_, _> =
                (first..first + n).map(|i| (format!("p{i}"), serde_json::json!({"type": "integer"}))).collect();
            serde_json::json!({"type": "object", "properties": properties})
        };
        // The bound counts every object's properties: two objects of 2,501
        // are refused as one of 5,001 is.
        for schema in
            [object(MAX_SCHEMA_PROPERTIES + 1, 0), serde_json::json!({"anyOf": [object(2501, 0), object(2501, 2501)]})]
        {
            let e = Constraint::json_schema(&vocab, &schema).unwrap_err().to_string();
            assert!(e.contains("more than 5000 object properties"), "{e}");
        }
        Constraint::json_schema(&vocab, &object(100, 0)).unwrap();
        // Pattern properties have a bound of their own (101 took seconds
        // more; 1,000 past a minute).
        let patterns = |n: usize| {
            let p: serde_json::Map<_, _> =
                (0..n).map(|i| (format!("^p{i}[a-z]*$"), serde_json::json!({"type": "integer"}))).collect();
            serde_json::json!({"type": "object", "patternProperties": p, "additionalProperties": false})
        };
        let e = Constraint::json_schema(&vocab, &patterns(MAX_SCHEMA_PATTERN_PROPERTIES + 1)).unwrap_err();
        assert!(e.to_string().contains("more than 100 patternProperties"), "{e}");
        Constraint::json_schema(&vocab, &patterns(10)).unwrap();
    }

    #[test]
    fn a_panic_llguidance_caught_is_an_error_without_its_backtrace() {
        let e =
            grammar_error("the JSON schema", "panic: assertion failed: too big\n<backtrace>\n 0: frames").to_string();
        assert_eq!(e, "model: the JSON schema: panic: assertion failed: too big");
    }
}
