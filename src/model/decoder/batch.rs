//! A batch of tokens for one forward pass, possibly of several sequences:
//! some continuing a prompt, some decoding one token.

use super::SeqId;

/// Tokens with the sequence each belongs to and whether its logits are wanted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// Token ids.
    pub tokens: Vec<u32>,
    /// The sequence of each token.
    pub seqs: Vec<SeqId>,
    /// Whether each token's logits are returned.
    pub logits: Vec<bool>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `token` of `seq`; its logits are returned when `logits`.
    pub fn push(&mut self, token: u32, seq: SeqId, logits: bool) {
        self.tokens.push(token);
        self.seqs.push(seq);
        self.logits.push(logits);
    }

    /// Appends a sequence's tokens, with logits for the last one only.
    pub fn push_prompt(&mut self, tokens: &[u32], seq: SeqId) {
        for (i, &t) in tokens.iter().enumerate() {
            self.push(t, seq, i + 1 == tokens.len());
        }
    }

    /// Tokens in the batch.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the batch has no token.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Tokens whose logits are returned.
    pub fn n_outputs(&self) -> usize {
        self.logits.iter().filter(|&&l| l).count()
    }

    /// Makes this batch a copy of `other`, reusing this one's memory (no
    /// allocation once it has held a batch as long).
    pub fn copy_from(&mut self, other: &Batch) {
        self.clear();
        self.tokens.extend_from_slice(&other.tokens);
        self.seqs.extend_from_slice(&other.seqs);
        self.logits.extend_from_slice(&other.logits);
    }

    /// Removes every token, keeping the memory.
    pub fn clear(&mut self) {
        self.tokens.clear();
        self.seqs.clear();
        self.logits.clear();
    }
}
