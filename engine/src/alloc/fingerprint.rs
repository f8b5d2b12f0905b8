//! A record of everything a plan was computed from, compared word by word.

/// The inputs of the last plan as a flat list of words (per tensor: role,
/// buffer type, flags, in-place candidates, size, source and view links).
///
/// A new graph is written over the old record in place: each word is
/// compared with the one it replaces, so comparing costs one pass over the
/// graph and, once the vector has grown to the graph's size, no allocation.
/// Unlike a hash, equal records mean equal plan inputs, never a collision.
#[derive(Debug, Default, Clone)]
pub(crate) struct Fingerprint {
    words: Vec<u64>,
    len: usize,
    same: bool,
    /// Whether `words` is a complete record (false while one is being
    /// written, and after a write that was abandoned by an error).
    complete: bool,
}

impl Fingerprint {
    /// Starts writing a new record over the old one.
    pub(crate) fn begin(&mut self) {
        self.same = self.complete;
        self.complete = false;
        self.len = 0;
    }

    /// Appends one word.
    #[inline]
    pub(crate) fn push(&mut self, word: u64) {
        match self.words.get_mut(self.len) {
            Some(old) => {
                if *old != word {
                    self.same = false;
                    *old = word;
                }
            }
            None => {
                self.same = false;
                self.words.push(word);
            }
        }
        self.len += 1;
    }

    /// Appends two 32-bit values as one word.
    #[inline]
    pub(crate) fn push_pair(&mut self, a: u32, b: u32) {
        self.push(u64::from(a) | (u64::from(b) << 32));
    }

    /// Ends the record; returns whether it equals the previous complete one.
    pub(crate) fn finish(&mut self) -> bool {
        if self.len != self.words.len() {
            self.same = false;
            self.words.truncate(self.len);
        }
        self.complete = true;
        self.same
    }

    /// Forgets the record, so the next one never compares equal.
    pub(crate) fn invalidate(&mut self) {
        self.complete = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(f: &mut Fingerprint, words: &[u64]) -> bool {
        f.begin();
        for &w in words {
            f.push(w);
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
        f.push(9); // abandoned: no finish
        assert!(!record(&mut f, &[]), "after an abandoned record nothing compares equal");
        f.invalidate();
        assert!(!record(&mut f, &[]));
    }
}
