//! Which keys a query may see, as an additive mask (0 or -inf).
//!
//! Masks are filled on the host, per batch: a decoder's cache cells carry a
//! sequence and a position, an encoder's keys a padding flag. One rule
//! covers both: same sequence, and for causal attention no later position,
//! and for sliding-window attention no position a window or more behind.

use half::f16;

/// The visibility rule of an attention layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MaskRule {
    /// Keys after the query's position are hidden (decoders).
    pub causal: bool,
    /// Keys `window` or more positions behind the query are hidden (0 = no window).
    pub window: usize,
}

impl MaskRule {
    /// Causal attention over the whole past.
    pub const CAUSAL: Self = Self { causal: true, window: 0 };
    /// Every key of the same sequence (encoders).
    pub const BIDIRECTIONAL: Self = Self { causal: false, window: 0 };

    /// Whether a query at `query_pos` sees a key at `key_pos` of the same sequence.
    pub fn sees(&self, query_pos: usize, key_pos: usize) -> bool {
        if self.causal && key_pos > query_pos {
            return false;
        }
        self.window == 0 || query_pos.abs_diff(key_pos) < self.window
    }
}

/// The mask entry for a visible or hidden key.
pub fn mask_value(visible: bool) -> f16 {
    if visible { f16::ZERO } else { f16::NEG_INFINITY }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_hide_the_future_and_what_lies_beyond_the_window() {
        assert!(MaskRule::CAUSAL.sees(5, 5) && MaskRule::CAUSAL.sees(5, 0) && !MaskRule::CAUSAL.sees(5, 6));
        assert!(MaskRule::BIDIRECTIONAL.sees(0, 9));
        let swa = MaskRule { causal: true, window: 3 };
        assert!(swa.sees(5, 3) && !swa.sees(5, 2) && !swa.sees(5, 6));
    }
}
