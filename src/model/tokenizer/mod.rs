//! Tokenizers from GGUF metadata, giving the ids llama.cpp gives.
//!
//! Two families: GPT-2 style byte-level BPE (`tokenizer.ggml.model = gpt2`)
//! with the pre-tokenizer its `tokenizer.ggml.pre` names, and SentencePiece
//! style (`llama`). Encoding splits special tokens out of the text first
//! (control tokens only when asked to parse them), then tokenizes the text
//! between them; BOS/EOS are added as the metadata says. Decoding undoes the
//! byte mapping; [`StreamDecoder`] decodes token by token without ever
//! splitting a UTF-8 character.
//!
//! ```no_run
//! use gantry::model::{Gguf, tokenizer::Tokenizer};
//! let gguf = Gguf::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let tok = Tokenizer::from_gguf(&gguf)?;
//! let ids = tok.encode("The capital of France is", false, true)?;
//! assert_eq!(ids, [504, 3575, 282, 4649, 314]);
//! assert_eq!(tok.decode_string(&ids, false, false)?, "The capital of France is");
//! # Ok::<(), gantry::Error>(())
//! ```

mod bpe;
mod pretokenize;
mod special;
mod spm;
mod stream;
mod unicode;
mod unicode_tables;
mod vocab;

// hashbrown's default hasher is several times faster than SipHash on the
// short keys (token texts, id pairs) looked up for every byte encoded.
use hashbrown::HashMap;

use crate::{Error, Result};

use crate::model::gguf::Gguf;

pub use pretokenize::PreTokenizer;
pub use stream::{StreamDecoder, take_complete_utf8};
pub use unicode::{Category, byte_to_char, category, char_to_byte};
pub use vocab::{SpecialTokens, Token, TokenAttr, VocabKind};

/// A token id (an index into the vocabulary).
pub type TokenId = u32;

/// A tokenizer built from a GGUF file's `tokenizer.ggml.*` metadata.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    source: String,
    kind: VocabKind,
    tokens: Vec<Token>,
    token_to_id: HashMap<String, TokenId>,
    merges: HashMap<(TokenId, TokenId), (u32, Option<TokenId>)>,
    special: SpecialTokens,
    eog: Vec<TokenId>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    clean_spaces: bool,
    ignore_merges: bool,
    /// The token spelling each byte: GPT-2's byte character (BPE) or `<0xNN>` (SentencePiece).
    byte_tokens: [Option<TokenId>; 256],
    /// Control, user-defined and unknown tokens, longest text first: split out of text before tokenizing.
    special_by_length: Vec<TokenId>,
    /// Each token's bytes when decoded with special tokens shown.
    pieces: Vec<Box<[u8]>>,
}

impl Tokenizer {
    /// Reads the vocabulary from `gguf`'s metadata. Missing or malformed
    /// metadata, an unsupported tokenizer model or pre-tokenizer, and special
    /// token rules the vocabulary cannot satisfy are errors naming the file.
    pub fn from_gguf(gguf: &Gguf) -> Result<Tokenizer> {
        let v = vocab::load(gguf)?;
        let mut byte_tokens = [None; 256];
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            *slot = match v.kind {
                VocabKind::Bpe(_) => v.token_to_id.get(byte_to_char(b as u8).encode_utf8(&mut [0; 4])).copied(),
                VocabKind::Spm => v.token_to_id.get(&format!("<0x{b:02X}>")).copied().or_else(|| {
                    (b < 0x80).then(|| v.token_to_id.get((b as u8 as char).encode_utf8(&mut [0; 4])).copied()).flatten()
                }),
            };
        }
        let special = TokenAttr::CONTROL.with(TokenAttr::USER_DEFINED).with(TokenAttr::UNKNOWN);
        let mut special_by_length: Vec<TokenId> =
            (0..v.tokens.len() as TokenId).filter(|&id| v.tokens[id as usize].attr.intersects(special)).collect();
        special_by_length.sort_by_key(|&id| std::cmp::Reverse(v.tokens[id as usize].text.len()));
        let mut tok = Tokenizer {
            source: gguf.source().to_owned(),
            kind: v.kind,
            tokens: v.tokens,
            token_to_id: v.token_to_id,
            merges: v.merges,
            special: v.special,
            eog: v.eog,
            add_bos: v.add_bos,
            add_eos: v.add_eos,
            add_space_prefix: v.add_space_prefix,
            clean_spaces: v.clean_spaces,
            ignore_merges: v.ignore_merges,
            byte_tokens,
            special_by_length,
            pieces: Vec::new(),
        };
        tok.pieces = (0..tok.tokens.len()).map(|id| tok.render_piece(id).into_boxed_slice()).collect();
        Ok(tok)
    }

    // ---- facts -------------------------------------------------------------------

    /// The tokenizer family.
    pub fn kind(&self) -> VocabKind {
        self.kind
    }

    /// Number of tokens.
    pub fn n_vocab(&self) -> usize {
        self.tokens.len()
    }

    /// Token `id`, or an error when it is outside the vocabulary.
    pub fn token(&self, id: TokenId) -> Result<&Token> {
        self.tokens.get(id as usize).ok_or_else(|| self.out_of_range(id))
    }

    /// The id of the token whose text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.token_to_id.get(text).copied()
    }

    /// The special token ids.
    pub fn special(&self) -> &SpecialTokens {
        &self.special
    }

    /// Beginning-of-sequence token.
    pub fn bos(&self) -> Option<TokenId> {
        self.special.bos
    }

    /// End-of-sequence token.
    pub fn eos(&self) -> Option<TokenId> {
        self.special.eos
    }

    /// Whether `id` ends generation (EOS, end of turn, and the like).
    pub fn is_eog(&self, id: TokenId) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// The end-of-generation tokens, sorted.
    pub fn eog_tokens(&self) -> &[TokenId] {
        &self.eog
    }

    /// Whether encoding with `add_special` puts BOS first.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether encoding with `add_special` puts EOS last.
    pub fn adds_eos(&self) -> bool {
        self.add_eos
    }

    fn out_of_range(&self, id: TokenId) -> Error {
        gantry_engine::Error::OutOfBounds(format!(
            "token id {id} is outside the vocabulary of {} tokens ({})",
            self.tokens.len(),
            self.source
        ))
        .into()
    }

    // ---- encoding --------------------------------------------------------------------

    /// The token ids of `text` (llama.cpp's `llama_tokenize`): with
    /// `add_special`, BOS and EOS as the metadata says; with `parse_special`,
    /// control tokens written in the text (`<|im_start|>`) become their ids
    /// instead of being tokenized as text. User-defined tokens are always
    /// recognized.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<TokenId>> {
        self.encode_with(text, add_special, parse_special, self.add_space_prefix)
    }

    /// The token ids of `text` that continues earlier text (a grammar's
    /// forced bytes after the reply so far): as [`Tokenizer::encode`]
    /// without specials, and without the space a SentencePiece vocabulary
    /// puts before the start of a text, which a continuation has not.
    pub fn encode_continuation(&self, text: &str) -> Result<Vec<TokenId>> {
        self.encode_with(text, false, false, false)
    }

    fn encode_with(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
        space_prefix: bool,
    ) -> Result<Vec<TokenId>> {
        let fragments = special::partition(self, text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.extend(self.special.bos);
        }
        match self.kind {
            VocabKind::Bpe(pre) => {
                for f in &fragments {
                    match f {
                        special::Fragment::Text(range) => self.encode_bpe(pre, &text[range.clone()], &mut out),
                        special::Fragment::Token(id) => out.push(*id),
                    }
                }
            }
            VocabKind::Spm => {
                let mut prev_special = true;
                let mut escaped = String::new();
                for f in &fragments {
                    match f {
                        special::Fragment::Text(range) => {
                            escaped.clear();
                            if space_prefix && prev_special {
                                escaped.push('▁');
                            }
                            escaped.extend(text[range.clone()].chars().map(|c| if c == ' ' { '▁' } else { c }));
                            self.encode_spm(&escaped, &mut out)?;
                            prev_special = false;
                        }
                        special::Fragment::Token(id) => {
                            out.push(*id);
                            prev_special = true;
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.special.eos);
        }
        Ok(out)
    }

    // ---- decoding --------------------------------------------------------------------

    /// Token `id`'s bytes (llama.cpp's `llama_token_to_piece`): control and
    /// unknown tokens give nothing unless `special`.
    pub fn token_to_piece(&self, id: TokenId, special: bool) -> Result<&[u8]> {
        let token = self.token(id)?;
        if !special && token.attr.intersects(TokenAttr::CONTROL.with(TokenAttr::UNKNOWN)) {
            return Ok(&[]);
        }
        Ok(&self.pieces[id as usize])
    }

    fn render_piece(&self, id: usize) -> Vec<u8> {
        let token = &self.tokens[id];
        let attr = token.attr;
        let shown_raw = TokenAttr::CONTROL.with(TokenAttr::UNKNOWN).with(TokenAttr::USER_DEFINED);
        if attr.intersects(shown_raw) {
            return token.text.as_bytes().to_vec();
        }
        if attr.intersects(TokenAttr::NORMAL) {
            return match self.kind {
                VocabKind::Spm => token.text.replace('▁', " ").into_bytes(),
                VocabKind::Bpe(_) => {
                    let mut out = Vec::with_capacity(token.text.len());
                    for c in token.text.chars() {
                        match char_to_byte(c) {
                            Some(b) => out.push(b),
                            // What llama.cpp writes for a character outside GPT-2's byte mapping.
                            None => {
                                out.extend_from_slice(b"[UNK_BYTE_0x");
                                for b in c.encode_utf8(&mut [0; 4]).bytes() {
                                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                                }
                                out.extend_from_slice(token.text.as_bytes());
                                out.push(b']');
                            }
                        }
                    }
                    out
                }
            };
        }
        if attr.intersects(TokenAttr::BYTE) {
            return vec![parse_byte_token(&token.text)];
        }
        Vec::new()
    }

    /// The bytes of `ids` (llama.cpp's `llama_detokenize`): with
    /// `remove_special`, a leading BOS and trailing EOS the tokenizer adds are
    /// left out; with `unparse_special`, control tokens are written as their
    /// text. SentencePiece's space prefix is removed, and BPE vocabularies
    /// that ask for it get llama.cpp's clean-up of spaces before punctuation.
    /// An id outside the vocabulary is an error.
    pub fn decode(&self, ids: &[TokenId], remove_special: bool, unparse_special: bool) -> Result<Vec<u8>> {
        let mut ids = ids;
        let mut remove_space = self.add_space_prefix;
        if remove_special && self.add_bos && ids.first().is_some_and(|&id| Some(id) == self.special.bos) {
            remove_space = false;
            ids = &ids[1..];
        }
        if remove_special && self.add_eos && ids.last().is_some_and(|&id| Some(id) == self.special.eos) {
            ids = &ids[..ids.len() - 1];
        }
        let mut text = Vec::new();
        for &id in ids {
            let mut piece = self.token_to_piece(id, unparse_special)?;
            if remove_space {
                piece = piece.strip_prefix(b" ").unwrap_or(piece);
            }
            remove_space = false;
            text.extend_from_slice(piece);
        }
        if self.clean_spaces {
            clean_up_spaces(&mut text);
        }
        Ok(text)
    }

    /// [`Tokenizer::decode`] as a string (invalid UTF-8 replaced by U+FFFD).
    pub fn decode_string(&self, ids: &[TokenId], remove_special: bool, unparse_special: bool) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.decode(ids, remove_special, unparse_special)?).into_owned())
    }

    /// A decoder for generated tokens, one at a time.
    pub fn stream_decoder(&self, special: bool) -> StreamDecoder<'_> {
        StreamDecoder::new(self, special)
    }
}

/// The byte of a byte token `<0xNN>`: its two characters after `<0x` read as
/// hex, stopping at the first that is not a hex digit (as `strtol` does).
fn parse_byte_token(text: &str) -> u8 {
    let digits = text.get(3..).unwrap_or("").chars().take(2).map_while(|c| c.to_digit(16));
    digits.fold(0u32, |acc, d| acc * 16 + d) as u8
}

/// llama.cpp's `clean_up_tokenization_spaces`, three passes done in place as
/// llama.cpp does them (the passes read bytes earlier passes wrote).
fn clean_up_spaces(text: &mut Vec<u8>) {
    // " ?", " !", " .", " ," lose the space.
    let n = text.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    // " ' " loses both spaces.
    let n = total;
    total = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = text[i];
        if x == b'\'' && i + 1 < n && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }
    // " 's", " 'm", " 're", " 've" lose the space.
    let n = total;
    total = usize::from(n > 0);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = text[i + 1];
            if matches!(x1, b's' | b'm') || (i + 2 < n && matches!((x1, text[i + 2]), (b'r', b'e') | (b'v', b'e'))) {
                total -= 1;
            }
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

#[cfg(test)]
mod tests;
