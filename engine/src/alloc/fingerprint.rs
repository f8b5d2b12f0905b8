//! A record of everything a plan was computed from, compared word by word.

/// Four words of a [`Fingerprint`] (one tensor's plan inputs, or eight
/// dense indices of a list).
pub(crate) type Block = [u64; 4];

/// The inputs of the last plan as a flat list of words (per tensor: role,
/// buffer type, flags, in-place candidates, size, source and view links).
///
/// A new record is written beside the previous one and the two are compared
/// at the end in one pass (a vectorized memory compare). Records are
/// appended in blocks from iterators of known length, so writing costs a
/// store per word (no zero fill first, no capacity check per word); once
/// both vectors have grown to the graph's size, no allocation. Unlike a
/// hash, equal records mean equal plan inputs, never a collision.
#[derive(Debug, Default, Clone)]
pub(crate) struct Fingerprint {
    blocks: Vec<Block>,
    previous: Vec<Block>,
    /// Whether `previous` is a complete record (false after a write that
    /// was abandoned by an error, or an invalidation).
    previous_complete: bool,
    /// Whether `blocks` is being written.
    writing: bool,
}

impl Fingerprint {
    /// Starts writing a new record; the last complete one is kept to compare with.
    pub(crate) fn begin(&mut self) {
        if !self.writing {
            std::mem::swap(&mut self.blocks, &mut self.previous);
        } else {
            // The last write was abandoned: it is no record to compare with.
            self.previous_complete = false;
        }
        self.blocks.clear();
        self.writing = true;
    }

    /// Appends `blocks` to the record.
    #[inline]
    pub(crate) fn extend(&mut self, blocks: impl IntoIterator<Item = Block>) {
        self.blocks.extend(blocks);
    }

    /// Ends the record; returns whether it equals the previous complete one.
    pub(crate) fn finish(&mut self) -> bool {
        let same = self.previous_complete && self.blocks == self.previous;
        // The next record is written into `previous`: grow it now, while this
        // call allocates anyway, so the same graph again allocates nothing.
        if self.previous.capacity() < self.blocks.len() {
            self.previous.reserve(self.blocks.len() - self.previous.len());
        }
        self.writing = false;
        self.previous_complete = true;
        same
    }

    /// Forgets the record, so the next one never compares equal.
    pub(crate) fn invalidate(&mut self) {
        if self.writing {
            self.writing = false;
            self.blocks.clear();
        }
        self.previous_complete = false;
        // The record just finished is what the next begin compares against.
        self.blocks.clear();
        self.previous.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(f: &mut Fingerprint, words: &[u64]) -> bool {
        f.begin();
        f.extend(words.iter().map(|&w| [w, 0, 0, 0]));
        f.finish()
    }

    #[test]
    fn equal_records_compare_equal_and_any_change_is_seen() {
        let mut f = Fingerprint::default();
        assert!(!record(&mut f, &[1, 2, 3]), "the first record has nothing to equal");
        assert!(record(&mut f, &[1, 2, 3]));
        assert!(!record(&mut f, &[1, 2, 4]));
        assert!(!record(&mut f, &[1, 2]), "shorter");
        assert!(!record(&mut f, &[1, 2, 0]), "longer");
        assert!(record(&mut f, &[1, 2, 0]));
    }

    #[test]
    fn empty_and_abandoned_records() {
        let mut f = Fingerprint::default();
        assert!(!record(&mut f, &[]), "an empty first record is still new");
        assert!(record(&mut f, &[]));
        f.begin();
        f.extend([[9; 4]]); // abandoned: no finish
        assert!(!record(&mut f, &[]), "after an abandoned record nothing compares equal");
        f.invalidate();
        assert!(!record(&mut f, &[]));
    }
}
