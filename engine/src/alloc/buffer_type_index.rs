//! A buffer type's position in a [`super::GraphAllocator`]'s list.

/// A buffer type's position in the list a [`super::GraphAllocator`] was
/// made with: which planner, and which buffers, a tensor's memory comes
/// from. The scheduler gives backends that share a buffer type one index.
///
/// ```
/// use gantry_engine::alloc::BufferTypeIndex;
/// let first = BufferTypeIndex::new(0);
/// assert_eq!(first.get(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BufferTypeIndex(u8);

impl BufferTypeIndex {
    /// Most buffer types one allocator plans for.
    pub const MAX: usize = 255;

    /// The buffer type at position `i` (values above [`Self::MAX`] saturate
    /// and are reported by the allocator as out of range).
    #[inline]
    pub const fn new(i: usize) -> Self {
        Self(if i > Self::MAX { Self::MAX as u8 } else { i as u8 })
    }

    /// The position, for indexing per-buffer-type lists.
    #[inline]
    pub const fn get(self) -> usize {
        self.0 as usize
    }
}
