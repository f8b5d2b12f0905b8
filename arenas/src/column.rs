//! Dense component columns indexed by node position.

use std::ops::{Index, IndexMut};

/// One component stored densely, one entry per node position
/// (struct-of-arrays storage). `reset` keeps the capacity, so a column sized
/// for a graph once is refilled for the same graph without allocating.
///
/// ```
/// use gantry_arenas::Column;
/// let mut backend_of_node: Column<u8> = Column::new();
/// backend_of_node.reset(3, u8::MAX);
/// backend_of_node[1] = 0;
/// assert_eq!(backend_of_node.as_slice(), &[255, 0, 255]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Column<T> {
    data: Vec<T>,
}

impl<T: Clone> Column<T> {
    /// An empty column.
    pub const fn new() -> Self {
        Self { data: Vec::new() }
    }

    /// Resizes to `len` entries, all set to `fill`, keeping the capacity.
    pub fn reset(&mut self, len: usize, fill: T) {
        self.data.clear();
        self.data.resize(len, fill);
    }

    /// Appends one entry (allocates only past the retained capacity).
    pub fn push(&mut self, value: T) {
        self.data.push(value);
    }

    /// Appends every entry of `values` (allocates only past the retained capacity).
    pub fn extend_from_slice(&mut self, values: &[T]) {
        self.data.extend_from_slice(values);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the column is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The entries as a slice.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The entries as a mutable slice.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// The entry at `i`, if any.
    pub fn get(&self, i: usize) -> Option<&T> {
        self.data.get(i)
    }

    /// Allocated capacity, in entries.
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// Removes every entry, keeping the capacity.
    pub fn clear(&mut self) {
        self.data.clear();
    }
}

impl<T> Index<usize> for Column<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.data[i]
    }
}

impl<T> IndexMut<usize> for Column<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.data[i]
    }
}
