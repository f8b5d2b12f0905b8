//! Bounds on the sizes that come from outside the process — a model file, a
//! remote peer's message, a command-line flag, a C argument — checked before
//! any of them sizes an allocation or a loop.
//!
//! One type for every reader of untrusted input: the GGUF, safetensors and
//! BERT loaders and the remote server check shapes and counts against the
//! same [`Limits`], so a size that one of them refuses is refused by all.
//! The defaults are far above any real model (the largest published models
//! have under 200 layers and tensors of under 2^32 elements) and far below
//! what would overflow a size computation or exhaust memory by itself.

/// Bounds on sizes taken from input.
///
/// ```
/// use gantry_engine::Limits;
///
/// let limits = Limits::default();
/// assert_eq!(limits.check_shape(&[4096, 32000, 1, 1]), Ok(4096 * 32000));
/// // An empty tensor cannot hide a huge dimension behind its zero.
/// assert!(limits.check_shape(&[0, 1 << 60, 1, 1]).is_err());
/// assert!(limits.check_count("layers", 1 << 20, limits.max_layers).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most elements of one tensor, a zero-sized dimension counted as one
    /// (so `[0, 2^60]` is refused, not taken as empty and then looped over).
    pub max_tensor_elements: u64,
    /// Most tensors in one model file or one graph.
    pub max_tensors: usize,
    /// Most layers (blocks) a model may declare.
    pub max_layers: usize,
    /// Most tokens of context: a model's trained context, a sliding window,
    /// the cells of a KV cache, the tokens of one prompt or batch.
    pub max_context: usize,
    /// Most tokens in a vocabulary (and merges in a BPE merge list).
    pub max_vocab: usize,
    /// Most elements along one axis of a model's shape: a width (the
    /// embedding, the feed-forward network, a head), a head count, an
    /// expert count.
    pub max_width: usize,
    /// The most fuel one chat-template render may burn (minijinja's unit:
    /// about one instruction, or 64 bytes of data the template creates), so
    /// that a template's loops end and its strings stay small. Each render
    /// gets fuel in proportion to its conversation, up to this.
    pub max_template_fuel: u64,
    /// Most bytes one chat-template render may write.
    pub max_template_output: usize,
}

impl Limits {
    /// The defaults: 2^36 elements per tensor (256 GiB as f32), 2^16
    /// tensors, 4096 layers, 2^24 tokens of context (16 Mi; the longest
    /// published contexts are 10 Mi), 2^24 tokens of vocabulary (the largest
    /// real ones are ~2^18), 2^20 along one axis of a model's shape (the
    /// widest feed-forward networks are ~2^16), 2^24 fuel at most for a chat
    /// template (about 16 million instructions or 1 GiB of data; a render
    /// gets that only for a conversation of megabytes or thousands of
    /// messages, a short chat 2^18: a peak of tens of MB) and 64 MiB of
    /// template output (a prompt of 16 Mi tokens).
    pub const DEFAULT: Self = Self {
        max_tensor_elements: 1 << 36,
        max_tensors: 1 << 16,
        max_layers: 4096,
        max_context: 1 << 24,
        max_vocab: 1 << 24,
        max_width: 1 << 20,
        max_template_fuel: 1 << 24,
        max_template_output: 64 << 20,
    };

    /// The element count of a tensor of shape `ne` (zero when a dimension is
    /// zero), after checking that the product of its dimensions, each zero
    /// counted as one, is at most [`max_tensor_elements`](Self::max_tensor_elements).
    /// The error says why, for the caller to prefix with the tensor's name.
    pub fn check_shape(&self, ne: &[usize]) -> Result<u64, String> {
        let spanned = ne.iter().try_fold(1u64, |acc, &n| acc.checked_mul((n as u64).max(1)));
        match spanned {
            Some(n) if n <= self.max_tensor_elements => Ok(if ne.contains(&0) { 0 } else { n }),
            _ => {
                Err(format!("shape {ne:?} spans more than the {} elements a tensor may have", self.max_tensor_elements))
            }
        }
    }

    /// `n` if it is at most `max`, else an error naming `what`.
    pub fn check_count(&self, what: &str, n: u64, max: usize) -> Result<usize, String> {
        match usize::try_from(n) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(format!("{what} = {n} is more than the {max} allowed")),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::Limits;

    #[test]
    fn zero_dimensions_count_as_one_when_bounding() {
        let limits = Limits { max_tensor_elements: 100, ..Limits::DEFAULT };
        assert_eq!(limits.check_shape(&[10, 10, 1, 1]), Ok(100));
        assert_eq!(limits.check_shape(&[0, 100, 1, 1]), Ok(0));
        assert!(limits.check_shape(&[0, 101, 1, 1]).is_err());
        assert!(limits.check_shape(&[usize::MAX, usize::MAX, 1, 1]).is_err());
    }

    #[test]
    fn counts_above_the_bound_name_what_they_count() {
        let limits = Limits::DEFAULT;
        assert_eq!(limits.check_count("layers", 32, limits.max_layers), Ok(32));
        let err = limits.check_count("block_count", u64::from(u32::MAX), limits.max_layers).unwrap_err();
        assert!(err.contains("block_count"), "{err}");
    }
}
