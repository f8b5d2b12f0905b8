//! Pre-tokenizers: splitting text into words before byte-level BPE, by the
//! regular expressions llama.cpp associates with each `tokenizer.ggml.pre`
//! value, written out by hand.
//!
//! llama.cpp applies a list of expressions in turn; each one splits every
//! piece the previous ones produced into its matches and the text between
//! them. The splitters below keep that structure: each takes the code points
//! and the current piece lengths and returns new piece lengths.

use crate::{Error, Result};

use super::unicode::CharClass;

/// The splitting rules of a `tokenizer.ggml.pre` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// llama.cpp's default: punctuation runs, GPT-2's expression, number
    /// runs, then groups of three ASCII digits.
    Default,
    /// GPT-2: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
    Gpt2,
    /// StarCoder, SmolLM, Refact, Command-R...: every digit alone, then GPT-2's.
    StarCoder,
    /// Llama 3: case-insensitive contractions, letters with one leading
    /// non-letter, numbers in groups of up to three, punctuation with
    /// trailing newlines, newline runs, spaces.
    Llama3,
    /// Qwen 2: Llama 3's with every digit alone.
    Qwen2,
    /// Qwen 3.5: Qwen 2's with combining marks counted as letters.
    Qwen35,
    /// GPT-4o (also Llama 4, MiniMax-M2): Llama 3's, but a word is a run of
    /// capitals then lower case (`HelloWorld` is two), takes its
    /// contraction, and punctuation also keeps trailing slashes.
    Gpt4o,
    /// Falcon: punctuation runs, GPT-2's, groups of three ASCII digits.
    Falcon,
    /// DeepSeek Coder: newlines, letter runs, punctuation runs, CJK runs, digits.
    DeepSeekCoder,
    /// BLOOM, Poro, GPT-3 Finnish: ` ?[^(\s|.,!?…。，、।۔،)]+`.
    Bloom,
}

/// Splits `text` into pieces; returns their byte ranges, covering the text.
pub(crate) fn split(pre: PreTokenizer, text: &str) -> Vec<std::ops::Range<usize>> {
    let cpts: Vec<char> = text.chars().collect();
    let mut pieces = vec![cpts.len()];
    let isolate = |pieces: &[usize], m: fn(&[char], usize, usize) -> usize| split_matches(&cpts, pieces, m);
    match pre {
        PreTokenizer::Default => {
            pieces = isolate(&pieces, |c, p, e| run(c, p, e, |ch| is_punctuation_or(ch, "$+<=>^~|")));
            pieces = split_gpt2(&cpts, &pieces);
            pieces = isolate(&pieces, |c, p, e| run(c, p, e, |ch| CharClass::of(ch).is_number()));
            pieces = isolate(&pieces, three_ascii_digits);
        }
        PreTokenizer::Gpt2 => pieces = split_gpt2(&cpts, &pieces),
        PreTokenizer::StarCoder => {
            pieces = isolate(&pieces, |c, p, _| usize::from(CharClass::of(c[p]).is_number()));
            pieces = split_gpt2(&cpts, &pieces);
        }
        PreTokenizer::Llama3 => pieces = split_llama3(&cpts, &pieces, 3, false),
        PreTokenizer::Qwen2 => pieces = split_llama3(&cpts, &pieces, 1, false),
        PreTokenizer::Qwen35 => pieces = split_llama3(&cpts, &pieces, 1, true),
        PreTokenizer::Gpt4o => pieces = split_gpt4o(&cpts, &pieces),
        PreTokenizer::Falcon => {
            pieces = isolate(&pieces, |c, p, e| run(c, p, e, |ch| is_punctuation_or(ch, "$+<=>^~|`")));
            pieces = split_gpt2(&cpts, &pieces);
            pieces = isolate(&pieces, three_ascii_digits);
        }
        PreTokenizer::DeepSeekCoder => {
            pieces = isolate(&pieces, |c, p, _| usize::from(c[p] == '\r' || c[p] == '\n'));
            pieces = isolate(&pieces, |c, p, e| space_then_run(c, p, e, |ch| CharClass::of(ch).is_letter()));
            pieces = isolate(&pieces, |c, p, e| space_then_run(c, p, e, |ch| CharClass::of(ch).is_punctuation()));
            pieces = isolate(&pieces, |c, p, e| {
                // `[一-龥ࠀ-一가-퟿]+`: the first two ranges join into U+0800..=U+9FA5.
                run(c, p, e, |ch| matches!(ch as u32, 0x0800..=0x9fa5 | 0xac00..=0xd7ff))
            });
            pieces = isolate(&pieces, |c, p, _| usize::from(CharClass::of(c[p]).is_number()));
        }
        PreTokenizer::Bloom => pieces = isolate(&pieces, bloom_word),
    }
    // Piece lengths in code points to byte ranges.
    let mut out = Vec::with_capacity(pieces.len());
    let (mut byte, mut cp) = (0, 0);
    for len in pieces {
        let start = byte;
        for c in &cpts[cp..cp + len] {
            byte += c.len_utf8();
        }
        cp += len;
        out.push(start..byte);
    }
    out
}

impl PreTokenizer {
    /// The rules llama.cpp uses for the `tokenizer.ggml.pre` value `name`
    /// (`""` when the key is missing), with whether it ignores merges for
    /// words that are whole tokens, cleans spaces when decoding, and adds a
    /// BOS token by default. An unsupported name is an error.
    pub(crate) fn from_name(name: &str, file: &str) -> Result<PreTokenizerConfig> {
        use PreTokenizer::*;
        let c = |pre, clean_spaces| PreTokenizerConfig { pre, clean_spaces, ignore_merges: false, add_bos: false };
        Ok(match name {
            "" | "default" => c(Default, true),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2"
            | "jina-v5-nano" => {
                PreTokenizerConfig { pre: Llama3, clean_spaces: true, ignore_merges: true, add_bos: true }
            }
            "dbrx" | "smaug-bpe" => c(Llama3, true),
            "deepseek-coder" => c(DeepSeekCoder, false),
            "falcon" => c(Falcon, true),
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de" | "a.x-4.0"
            | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais" | "exaone4" => c(Gpt2, true),
            "trillion" | "granite-docling" => c(Gpt2, false),
            "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => c(StarCoder, true),
            "command-r" | "smollm" => c(StarCoder, false),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" => c(Qwen2, false),
            "stablelm2" | "megrez" => c(Qwen2, true),
            "qwen35" => c(Qwen35, false),
            "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => c(Gpt4o, false),
            "bloom" | "gpt3-finnish" => c(Bloom, true),
            "poro-chat" => c(Bloom, false),
            other => {
                return Err(Error::InvalidModel {
                    file: file.to_owned(),
                    reason: format!("pre-tokenizer '{other}' (tokenizer.ggml.pre) is not supported"),
                });
            }
        })
    }
}

/// A pre-tokenizer with the vocabulary settings llama.cpp ties to its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PreTokenizerConfig {
    pub pre: PreTokenizer,
    pub clean_spaces: bool,
    pub ignore_merges: bool,
    pub add_bos: bool,
}

fn is_punctuation_or(c: char, extra: &str) -> bool {
    CharClass::of(c).is_punctuation() || (c.is_ascii() && extra.contains(c))
}

/// Length of the run of code points from `pos` (before `end`) satisfying `f`.
fn run(cpts: &[char], pos: usize, end: usize, f: impl Fn(char) -> bool) -> usize {
    cpts[pos..end].iter().take_while(|&&c| f(c)).count()
}

/// `\s?X+`: an optional whitespace, then at least one code point satisfying `f`.
fn space_then_run(cpts: &[char], pos: usize, end: usize, f: impl Fn(char) -> bool) -> usize {
    if cpts[pos].is_whitespace() && pos + 1 < end {
        let n = run(cpts, pos + 1, end, &f);
        if n > 0 {
            return 1 + n;
        }
    }
    run(cpts, pos, end, f)
}

/// `[0-9][0-9][0-9]`.
fn three_ascii_digits(cpts: &[char], pos: usize, end: usize) -> usize {
    if end - pos >= 3 && cpts[pos..pos + 3].iter().all(char::is_ascii_digit) { 3 } else { 0 }
}

/// ` ?[^(\s|.,!?…。，、।۔،)]+`.
fn bloom_word(cpts: &[char], pos: usize, end: usize) -> usize {
    let word = |c: char| !c.is_whitespace() && !"(|.,!?…。，、।۔،)".contains(c);
    if cpts[pos] == ' ' && pos + 1 < end {
        let n = run(cpts, pos + 1, end, word);
        if n > 0 {
            return 1 + n;
        }
    }
    run(cpts, pos, end, word)
}

/// Splits each piece into the leftmost non-overlapping matches of `matcher`
/// (which gives the length of a match starting at a position, 0 for none)
/// and the text between them, as `std::regex_iterator` does in llama.cpp.
fn split_matches(cpts: &[char], pieces: &[usize], matcher: fn(&[char], usize, usize) -> usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for &len in pieces {
        let end = start + len;
        let (mut pos, mut gap_start) = (start, start);
        while pos < end {
            let m = matcher(cpts, pos, end);
            if m == 0 {
                pos += 1;
                continue;
            }
            if pos > gap_start {
                out.push(pos - gap_start);
            }
            out.push(m);
            pos += m;
            gap_start = pos;
        }
        if end > gap_start {
            out.push(end - gap_start);
        }
        start = end;
    }
    out
}

/// One piece being split: its code points and the pieces found so far.
struct Piece<'a> {
    cpts: &'a [char],
    end: usize,
    prev_end: usize,
    out: &'a mut Vec<usize>,
}

impl Piece<'_> {
    fn get(&self, pos: usize) -> Option<char> {
        if pos < self.end { Some(self.cpts[pos]) } else { None }
    }

    fn class(&self, pos: usize) -> CharClass {
        self.get(pos).map_or(CharClass::NONE, CharClass::of)
    }

    /// Ends a word at `end`; returns its length.
    fn add(&mut self, end: usize) -> usize {
        let len = end - self.prev_end;
        if len > 0 {
            self.out.push(len);
        }
        self.prev_end = end;
        len
    }

    /// The last alternatives of every expression, `\s+(?!\S)|\s+|.`, for
    /// `spaces` white-space code points at `pos`: a run of spaces leaves its
    /// last one to the next word unless the piece ends there; no space takes
    /// one code point. Returns where the word ends.
    fn end_spaces(&mut self, pos: usize, spaces: usize) -> usize {
        let end = match spaces {
            0 | 1 => pos + 1,
            _ if self.get(pos + spaces).is_some() => pos + spaces - 1,
            _ => pos + spaces,
        };
        self.add(end);
        end
    }
}

/// `'s|'t|'re|'ve|'m|'ll|'d`, optionally ignoring case: its length at `pos`.
fn contraction(p: &Piece<'_>, pos: usize, ignore_case: bool) -> usize {
    if p.get(pos) != Some('\'') {
        return 0;
    }
    let lower = |c: Option<char>| c.map(|c| if ignore_case { c.to_ascii_lowercase() } else { c });
    match lower(p.get(pos + 1)) {
        Some('s' | 't' | 'm' | 'd') => 2,
        Some(a @ ('r' | 'v' | 'l')) => match (a, lower(p.get(pos + 2))) {
            ('r' | 'v', Some('e')) | ('l', Some('l')) => 3,
            _ => 0,
        },
        _ => 0,
    }
}

/// GPT-2's expression (llama.cpp's hand-written `unicode_regex_split_custom_gpt2`).
fn split_gpt2(cpts: &[char], pieces: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for &len in pieces {
        let mut p = Piece { cpts, end: start + len, prev_end: start, out: &mut out };
        let mut pos = start;
        while pos < p.end {
            let c = cpts[pos];
            let class = p.class(pos);
            let n = contraction(&p, pos, false);
            if n > 0 {
                pos += p.add(pos + n);
                continue;
            }
            let space = usize::from(c == ' ');
            let next = if c == ' ' { p.class(pos + 1) } else { class };
            // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
            let same: Option<fn(CharClass) -> bool> = if next.is_letter() {
                Some(CharClass::is_letter)
            } else if next.is_number() {
                Some(CharClass::is_number)
            } else if next.exists() && !(next.whitespace || next.is_letter() || next.is_number()) {
                Some(|k: CharClass| k.exists() && !(k.whitespace || k.is_letter() || k.is_number()))
            } else {
                None
            };
            if let Some(same) = same {
                pos += space;
                while same(p.class(pos)) {
                    pos += 1;
                }
                p.add(pos);
                continue;
            }
            let spaces = (0..).take_while(|&k| p.class(pos + k).whitespace).count();
            pos = p.end_spaces(pos, spaces);
        }
        start += len;
    }
    out
}

/// Llama 3's expression and its Qwen variants (llama.cpp's hand-written
/// `unicode_regex_split_custom_llama3` / `_qwen2` / `_qwen35`): numbers in
/// groups of at most `max_digits`; `marks` counts combining marks as letters.
fn split_llama3(cpts: &[char], pieces: &[usize], max_digits: usize, marks: bool) -> Vec<usize> {
    let letter = |k: CharClass| k.is_letter() || (marks && k.is_mark());
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for &len in pieces {
        let mut p = Piece { cpts, end: start + len, prev_end: start, out: &mut out };
        let mut pos = start;
        while pos < p.end {
            let c = cpts[pos];
            let class = p.class(pos);
            let n = contraction(&p, pos, true);
            if n > 0 {
                pos += p.add(pos + n);
                continue;
            }
            // `[^\r\n\p{L}\p{N}]?\p{L}+`
            if !(c == '\r' || c == '\n' || class.is_number()) && (letter(class) || letter(p.class(pos + 1))) {
                pos += 1;
                while letter(p.class(pos)) {
                    pos += 1;
                }
                p.add(pos);
                continue;
            }
            // `\p{N}{1,max_digits}`
            if class.is_number() {
                let mut group = pos;
                while p.class(pos).is_number() {
                    pos += 1;
                    if pos - group >= max_digits {
                        p.add(pos);
                        group = pos;
                    }
                }
                p.add(pos);
                continue;
            }
            // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (llama.cpp tests the first code point's
            // existence, not the one after the space: a lone final space matches).
            let other = |k: CharClass| k.exists() && !(k.whitespace || letter(k) || k.is_number());
            let mut next = if c == ' ' { p.class(pos + 1) } else { class };
            if !(next.whitespace || letter(next) || next.is_number()) && class.exists() {
                pos += usize::from(c == ' ');
                while other(next) {
                    pos += 1;
                    next = p.class(pos);
                }
                while matches!(p.get(pos), Some('\r' | '\n')) {
                    pos += 1;
                }
                p.add(pos);
                continue;
            }
            let mut spaces = 0;
            let mut last_newline_end = None;
            while p.class(pos + spaces).whitespace {
                if matches!(p.get(pos + spaces), Some('\r' | '\n')) {
                    last_newline_end = Some(pos + spaces + 1);
                }
                spaces += 1;
            }
            // `\s*[\r\n]+`
            if let Some(end) = last_newline_end {
                pos = end;
                p.add(pos);
                continue;
            }
            pos = p.end_spaces(pos, spaces);
        }
        start += len;
    }
    out
}

/// The letter classes of GPT-4o's expression as llama.cpp runs it: it
/// rewrites `\p{Lu}...` into `(?=\p{L})[^a-z]` ("upper") and
/// `(?=\p{L})[^A-Z]` ("lower"), so only ASCII letters have a case and every
/// other letter is both.
fn upper_like(c: Option<char>) -> bool {
    c.is_some_and(|c| !c.is_ascii_lowercase() && CharClass::of(c).is_letter())
}

fn lower_like(c: Option<char>) -> bool {
    c.is_some_and(|c| !c.is_ascii_uppercase() && CharClass::of(c).is_letter())
}

/// GPT-4o's expression, which llama.cpp runs through `std::regex`
/// (ECMAScript: the first alternative that matches wins, quantifiers
/// backtrack):
///
/// ```text
/// [^\r\n\p{L}\p{N}]?U*L+C? | [^\r\n\p{L}\p{N}]?U+L*C? | \p{N}{1,3}
/// | ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
/// ```
///
/// with `U` an upper-like letter, `L` a lower-like one (see [`upper_like`])
/// and `C` a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`, any case).
fn split_gpt4o(cpts: &[char], pieces: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for &len in pieces {
        let mut p = Piece { cpts, end: start + len, prev_end: start, out: &mut out };
        let mut pos = start;
        while pos < p.end {
            let c = cpts[pos];
            let class = p.class(pos);
            // The optional leading code point: anything but a newline, letter or number.
            let lead = usize::from(!(c == '\r' || c == '\n' || class.is_letter() || class.is_number()));
            let q = pos + lead;
            if p.class(q).is_letter() {
                let uppers = (q..p.end).take_while(|&i| upper_like(p.get(i))).count();
                let lowers = (q + uppers..p.end).take_while(|&i| lower_like(p.get(i))).count();
                let end = if lowers > 0 {
                    // `U*L+` at its greediest.
                    q + uppers + lowers
                } else {
                    // `U*` gives back code points until `L+` can take one: the
                    // last letter of the run that is both upper- and lower-like
                    // (a non-ASCII one) ends the word; with none, `U+` takes the run.
                    (q..q + uppers).rev().find(|&i| lower_like(p.get(i))).map_or(q + uppers, |i| i + 1)
                };
                pos = end + contraction(&p, end, true);
                p.add(pos);
                continue;
            }
            // `\p{N}{1,3}`
            if class.is_number() {
                pos += (pos..p.end).take_while(|&i| p.class(i).is_number()).take(3).count();
                p.add(pos);
                continue;
            }
            // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
            let other = |k: CharClass| k.exists() && !(k.whitespace || k.is_letter() || k.is_number());
            let q = pos + usize::from(c == ' ');
            if other(p.class(q)) {
                pos = q;
                while other(p.class(pos)) {
                    pos += 1;
                }
                while matches!(p.get(pos), Some('\r' | '\n' | '/')) {
                    pos += 1;
                }
                p.add(pos);
                continue;
            }
            let mut spaces = 0;
            let mut last_newline_end = None;
            while p.class(pos + spaces).whitespace {
                if matches!(p.get(pos + spaces), Some('\r' | '\n')) {
                    last_newline_end = Some(pos + spaces + 1);
                }
                spaces += 1;
            }
            // `\s*[\r\n]+`
            if let Some(end) = last_newline_end {
                pos = end;
                p.add(pos);
                continue;
            }
            pos = p.end_spaces(pos, spaces);
        }
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreTokenizer, text: &str) -> Vec<&str> {
        split(pre, text).into_iter().map(|r| &text[r]).collect()
    }

    // Expected splits worked out by hand from the regular expressions.
    #[test]
    fn gpt2_splits() {
        assert_eq!(words(PreTokenizer::Gpt2, "Hello world"), ["Hello", " world"]);
        assert_eq!(words(PreTokenizer::Gpt2, "I'm  here!!"), ["I", "'m", " ", " here", "!!"]);
        assert_eq!(words(PreTokenizer::Gpt2, "a   b  "), ["a", "  ", " b", "  "]);
        assert_eq!(words(PreTokenizer::Gpt2, "x 123abc"), ["x", " 123", "abc"]);
        assert_eq!(words(PreTokenizer::Gpt2, "don'T"), ["don", "'", "T"]);
        assert_eq!(words(PreTokenizer::Gpt2, "\n\nhi"), ["\n", "\n", "hi"]);
        assert_eq!(words(PreTokenizer::Gpt2, ""), Vec::<&str>::new());
    }

    #[test]
    fn starcoder_isolates_digits_first() {
        assert_eq!(words(PreTokenizer::StarCoder, "in 2024, x"), ["in", " ", "2", "0", "2", "4", ",", " x"]);
    }

    #[test]
    fn llama3_splits() {
        assert_eq!(words(PreTokenizer::Llama3, "DON'T stop"), ["DON", "'T", " stop"]);
        assert_eq!(words(PreTokenizer::Llama3, "1234567"), ["123", "456", "7"]);
        assert_eq!(words(PreTokenizer::Llama3, "x  \n\n y"), ["x", "  \n\n", " y"]);
        assert_eq!(words(PreTokenizer::Llama3, "(hello)\n"), ["(hello", ")\n"]);
        assert_eq!(words(PreTokenizer::Llama3, "a ..\n\nb"), ["a", " ..\n\n", "b"]);
        assert_eq!(words(PreTokenizer::Qwen2, "v12"), ["v", "1", "2"]);
        assert_eq!(words(PreTokenizer::Qwen35, "e\u{301}x"), ["e\u{301}x"]);
        assert_eq!(words(PreTokenizer::Qwen2, "e\u{301}x"), ["e", "\u{301}x"]);
    }

    #[test]
    fn gpt4o_splits() {
        let w = |text| words(PreTokenizer::Gpt4o, text);
        assert_eq!(w("HelloWorld HTTPServer"), ["Hello", "World", " HTTPServer"]);
        assert_eq!(w("I'M DON'T you're"), ["I'M", " DON'T", " you're"]);
        assert_eq!(w("12345 a/b.\n//x"), ["123", "45", " a", "/b", ".\n//", "x"]);
        // Non-ASCII letters are both cases: `ÀB` ends its lower-case part at `À`.
        assert_eq!(w("ÀB Éa"), ["À", "B", " Éa"]);
        assert_eq!(w("x  \n\n y\t\tz"), ["x", "  \n\n", " y", "\t", "\tz"]);
    }

    #[test]
    fn default_and_falcon_and_bloom() {
        assert_eq!(words(PreTokenizer::Default, "a+=12345"), ["a", "+=", "123", "45"]);
        assert_eq!(words(PreTokenizer::Falcon, "`x`"), ["`", "x", "`"]);
        assert_eq!(words(PreTokenizer::Bloom, "hi, you there."), ["hi", ",", " you", " there", "."]);
    }

    #[test]
    fn pieces_cover_the_text() {
        let text = "Ünïcödé 🦙 \t\u{a0}x  123,456 'll\r\n\n end ";
        for pre in [
            PreTokenizer::Default,
            PreTokenizer::Gpt2,
            PreTokenizer::StarCoder,
            PreTokenizer::Llama3,
            PreTokenizer::Qwen2,
            PreTokenizer::Qwen35,
            PreTokenizer::Gpt4o,
            PreTokenizer::Falcon,
            PreTokenizer::DeepSeekCoder,
            PreTokenizer::Bloom,
        ] {
            let ranges = split(pre, text);
            assert_eq!(ranges.first().map(|r| r.start), Some(0));
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start && w[0].start < w[0].end), "{pre:?}");
            assert_eq!(ranges.last().map(|r| r.end), Some(text.len()));
        }
    }
}
