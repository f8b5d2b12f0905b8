//! A fixed-size bitset whose words can live anywhere (a `Vec`, or a bump arena).

/// A bitset over borrowed words, for marking visited slots without hashing.
///
/// ```
/// use gantry_arenas::BitSet;
/// let mut words = [0u64; 2];
/// let mut set = BitSet::new(&mut words);
/// assert!(set.insert(70));
/// assert!(!set.insert(70));
/// assert!(set.contains(70) && !set.contains(3));
/// ```
pub struct BitSet<'a> {
    words: &'a mut [u64],
}

impl<'a> BitSet<'a> {
    /// Wraps zeroed words; the set holds indices below `64 * words.len()`.
    pub fn new(words: &'a mut [u64]) -> Self {
        Self { words }
    }

    /// Number of words needed for `bits` bits.
    pub const fn words_for(bits: usize) -> usize {
        bits.div_ceil(64)
    }

    /// Inserts `i`; returns `true` if it was not present. Out-of-range indices
    /// are never present and cannot be inserted (returns `false`).
    #[inline]
    pub fn insert(&mut self, i: usize) -> bool {
        let Some(w) = self.words.get_mut(i / 64) else {
            return false;
        };
        let m = 1u64 << (i % 64);
        let was = *w & m != 0;
        *w |= m;
        !was
    }

    /// Whether `i` is in the set.
    #[inline]
    pub fn contains(&self, i: usize) -> bool {
        self.words.get(i / 64).is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    /// Removes every index.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }
}
