//! GPT-2 style byte-level BPE: each pre-tokenized word is mapped to GPT-2's
//! byte characters, then adjacent symbols are merged by merge rank (lowest
//! first, leftmost among equals) until no listed merge applies.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::pretokenize::{PreTokenizer, split};
use super::unicode::byte_to_char;
use super::{TokenId, Tokenizer};

/// A run of the word's bytes: its token id (when the run is a token), its
/// length, and its neighbours in the list of live symbols.
#[derive(Clone, Copy)]
struct Symbol {
    id: Option<TokenId>,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of `left` with its right neighbour, valid while both
/// still hold the tokens they held when it was queued.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Bigram {
    rank: u32,
    left: usize,
    right: usize,
    left_id: TokenId,
    right_id: TokenId,
    merged: Option<TokenId>,
}

impl Tokenizer {
    /// Appends the ids of `text` (no special tokens in it) to `out`.
    pub(super) fn encode_bpe(&self, pre: PreTokenizer, text: &str, out: &mut Vec<TokenId>) {
        let mut encoded = String::new();
        let mut symbols: Vec<Symbol> = Vec::new();
        let mut queue = BinaryHeap::new();
        for range in split(pre, text) {
            let word = &text.as_bytes()[range];
            if self.ignore_merges {
                encoded.clear();
                encoded.extend(word.iter().map(|&b| byte_to_char(b)));
                if let Some(&id) = self.token_to_id.get(&encoded) {
                    out.push(id);
                    continue;
                }
            }
            symbols.clear();
            symbols.extend(word.iter().enumerate().map(|(i, &b)| Symbol {
                id: self.byte_tokens[usize::from(b)],
                len: 1,
                prev: i.checked_sub(1),
                next: (i + 1 < word.len()).then_some(i + 1),
            }));
            queue.clear();
            for i in 1..symbols.len() {
                self.queue_bigram(&symbols, i - 1, i, &mut queue);
            }
            while let Some(Reverse(b)) = queue.pop() {
                let (l, r) = (symbols[b.left], symbols[b.right]);
                if l.len == 0 || r.len == 0 || l.id != Some(b.left_id) || r.id != Some(b.right_id) {
                    continue; // one side changed since the merge was queued
                }
                symbols[b.left] = Symbol { id: b.merged, len: l.len + r.len, prev: l.prev, next: r.next };
                symbols[b.right].len = 0;
                if let Some(next) = r.next {
                    symbols[next].prev = Some(b.left);
                }
                if let Some(prev) = l.prev {
                    self.queue_bigram(&symbols, prev, b.left, &mut queue);
                }
                if let Some(next) = r.next {
                    self.queue_bigram(&symbols, b.left, next, &mut queue);
                }
            }
            // Symbols that are not tokens are dropped, as llama.cpp does when
            // no single-byte token spells them.
            out.extend(symbols.iter().filter(|s| s.len > 0).filter_map(|s| s.id));
        }
    }

    fn queue_bigram(&self, symbols: &[Symbol], left: usize, right: usize, queue: &mut BinaryHeap<Reverse<Bigram>>) {
        let (Some(left_id), Some(right_id)) = (symbols[left].id, symbols[right].id) else {
            return;
        };
        if let Some(&(rank, merged)) = self.merges.get(&(left_id, right_id)) {
            queue.push(Reverse(Bigram { rank, left, right, left_id, right_id, merged }));
        }
    }
}
