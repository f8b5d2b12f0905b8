//! A record of everything a plan was computed from, compared word by word.

/// The inputs of the last plan as a flat list of words (per tensor: role,
/// buffer type, flags, in-place candidates, size, source and view links).
///
/// A new record is written beside the previous one and the two are compared
/// at the end in one pass (a vectorized memory compare), so writing a word
/// costs a store (words are appended in blocks, [`Fingerprint::extend`]);
/// once both vectors have grown to the graph's size, no allocation. Unlike a hash, equal records mean equal plan inputs, never a
/// collision.
#[derive(Debug, Default, Clone)]
pub(crate) struct Fingerprint {
    words: Vec<u64>,
    previous: Vec<u64>,
    /// Whether `previous` is a complete record (false after a write that
    /// was abandoned by an error, or an invalidation).
    previous_complete: bool,
    /// Whether `words` is being written.
    writing: bool,
}

impl Fingerprint {
    /// Starts writing a new record; the last complete one is kept to compare with.
    pub(crate) fn begin(&mut self) {
        if !self.writing {
            std::mem::swap(&mut self.words, &mut self.previous);
        } else {
            // The last write was abandoned: it is no record to compare with.
            self.previous_complete = false;
        }
        self.words.clear();
        self.writing = true;
    }

    /// Appends `n` words (zero) and returns them to be written.
    #[inline]
    pub(crate) fn extend(&mut self, n: usize) -> &mut [u64] {
        let start = self.words.len();
        self.words.resize(start + n, 0);
        &mut self.words[start..]
    }

    /// Ends the record; returns whether it equals the previous complete one.
    pub(crate) fn finish(&mut self) -> bool {
        let same = self.previous_complete && self.words == self.previous;
        // The next record is written into `previous`: grow it now, while this
        // call allocates anyway, so the same graph again allocates nothing.
        if self.previous.capacity() < self.words.len() {
            self.previous.reserve(self.words.len() - self.previous.len());
        }
        self.writing = false;
        self.previous_complete = true;
        same
    }

    /// Forgets the record, so the next one never compares equal.
    pub(crate) fn invalidate(&mut self) {
        if self.writing {
            self.writing = false;
            self.words.clear();
        }
        self.previous_complete = false;
        // The record just finished is what the next begin compares against.
        self.words.clear();
        self.previous.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(f: &mut Fingerprint, words: &[u64]) -> bool {
        f.begin();
        for &w in words {
            f.extend(1)[0] = w;
        }
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
        f.extend(1)[0] = 9; // abandoned: no finish
        assert!(!record(&mut f, &[]), "after an abandoned record nothing compares equal");
        f.invalidate();
        assert!(!record(&mut f, &[]));
    }
}
