//! A backend's position in the scheduler's priority list.

use std::fmt;

/// Most backends one scheduler drives (a [`BackendIndex`] is a bit in a
/// `u16` mask of backends).
pub const MAX_BACKENDS: usize = 16;

/// A backend's position in a scheduler's priority list: 0 is the highest
/// priority, the CPU is always last. Only a [`super::BackendSet`] hands
/// them out, so an index is always below its set's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BackendIndex(u8);

impl BackendIndex {
    /// The backend at priority `i` (`i < MAX_BACKENDS`; larger values wrap
    /// into range, which [`super::BackendSet`] never produces).
    #[inline]
    pub const fn new(i: usize) -> Self {
        Self((i % MAX_BACKENDS) as u8)
    }

    /// The backend at position `i`, as stored in a byte column (`i` came
    /// from [`BackendIndex::get`]).
    #[inline]
    pub(crate) const fn from_u8(i: u8) -> Self {
        Self(i)
    }

    /// The position, for indexing per-backend lists.
    #[inline]
    pub const fn get(self) -> usize {
        self.0 as usize
    }

    /// This backend's bit in a mask of backends.
    #[inline]
    pub const fn bit(self) -> u16 {
        1 << self.0
    }

    /// The backends of higher priority than this one, highest first.
    #[inline]
    pub fn higher(self) -> impl DoubleEndedIterator<Item = BackendIndex> + Clone {
        (0..self.0).map(BackendIndex)
    }
}

impl fmt::Display for BackendIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}
