//! SentencePiece style BPE (`tokenizer.ggml.model = llama`): the text's
//! characters are merged pairwise, highest token score first (leftmost among
//! equals), as long as the merged text is a token; what remains that is not
//! a token is written as byte tokens `<0xNN>`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::{Error, Result};

use super::{TokenId, Tokenizer};

#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // Highest score first; among equal scores the leftmost.
        self.score.total_cmp(&other.score).then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl Tokenizer {
    /// Appends the ids of `text` (spaces already written as `▁`) to `out`.
    pub(super) fn encode_spm(&self, text: &str, out: &mut Vec<TokenId>) -> Result<()> {
        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        for (i, (start, c)) in text.char_indices().enumerate() {
            let end = start + c.len_utf8();
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: (end < text.len()).then_some(i + 1),
            });
        }
        let mut queue = BinaryHeap::new();
        for i in 1..symbols.len() {
            self.queue_spm_bigram(text, &symbols, i - 1, i, &mut queue);
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            // Symbols only grow, so unchanged sizes mean unchanged symbols.
            if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
                continue;
            }
            symbols[b.left].len += r.len;
            symbols[b.left].next = r.next;
            symbols[b.right].len = 0;
            if let Some(next) = r.next {
                symbols[next].prev = Some(b.left);
            }
            if let Some(prev) = l.prev {
                self.queue_spm_bigram(text, &symbols, prev, b.left, &mut queue);
            }
            if let Some(next) = r.next {
                self.queue_spm_bigram(text, &symbols, b.left, next, &mut queue);
            }
        }
        let mut at = if symbols.is_empty() { None } else { Some(0) };
        while let Some(i) = at {
            let s = symbols[i];
            let piece = &text[s.start..s.start + s.len];
            match self.token_to_id.get(piece) {
                Some(&id) => out.push(id),
                None => {
                    for &b in piece.as_bytes() {
                        let id = self.byte_tokens[usize::from(b)].ok_or_else(|| Error::InvalidModel {
                            file: self.source.clone(),
                            reason: format!("the vocabulary has no byte token <0x{b:02X}> for text it cannot spell"),
                        })?;
                        out.push(id);
                    }
                }
            }
            at = s.next;
        }
        Ok(())
    }

    fn queue_spm_bigram(
        &self,
        text: &str,
        symbols: &[Symbol],
        left: usize,
        right: usize,
        queue: &mut BinaryHeap<Bigram>,
    ) {
        let (l, r) = (symbols[left], symbols[right]);
        let size = l.len + r.len;
        let Some(&id) = self.token_to_id.get(&text[l.start..l.start + size]) else {
            return;
        };
        queue.push(Bigram { score: self.tokens[id as usize].score, left, right, size });
    }
}
