//! Decoding generated tokens one by one for streaming output.

use crate::Result;

use super::{TokenId, Tokenizer};

/// Turns tokens into text as they are generated. A token may end in the
/// middle of a UTF-8 character (byte tokens, byte-level BPE); the decoder
/// holds such bytes back until the character is complete, so every string it
/// returns is whole characters. Bytes that can never form a character come
/// out as U+FFFD.
///
/// Pieces are concatenated as they are (llama.cpp's `token_to_piece`): no
/// space prefix is removed and no spaces are cleaned up.
#[derive(Debug)]
pub struct StreamDecoder<'t> {
    tokenizer: &'t Tokenizer,
    special: bool,
    pending: Vec<u8>,
}

impl<'t> StreamDecoder<'t> {
    /// A decoder over `tokenizer`; `special` writes control tokens as their text.
    pub fn new(tokenizer: &'t Tokenizer, special: bool) -> Self {
        Self { tokenizer, special, pending: Vec::new() }
    }

    /// Adds token `id`; returns the text that became complete (maybe empty).
    pub fn push(&mut self, id: TokenId) -> Result<String> {
        self.pending.extend_from_slice(self.tokenizer.token_to_piece(id, self.special)?);
        Ok(take_complete_utf8(&mut self.pending))
    }

    /// Bytes held back waiting for the rest of a character.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Ends the stream: whatever is held back, with U+FFFD for an unfinished character.
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}

/// Takes the complete UTF-8 text at the start of `pending` out of it: an
/// incomplete character at the end stays (the rest of it comes with the
/// next piece), an invalid byte becomes U+FFFD.
pub fn take_complete_utf8(pending: &mut Vec<u8>) -> String {
    let mut out = String::new();
    loop {
        match std::str::from_utf8(pending) {
            Ok(s) => {
                out.push_str(s);
                pending.clear();
                return out;
            }
            Err(e) => {
                let valid = e.valid_up_to();
                // The prefix up to `valid` was just checked to be UTF-8.
                out.push_str(std::str::from_utf8(&pending[..valid]).unwrap_or_default());
                match e.error_len() {
                    // An incomplete character at the end: wait for more bytes.
                    None => {
                        pending.drain(..valid);
                        return out;
                    }
                    Some(bad) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        pending.drain(..valid + bad);
                    }
                }
            }
        }
    }
}
