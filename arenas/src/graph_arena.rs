//! The bump arena graphs are built in.

use bumpalo::Bump;

/// A bump arena for one graph's node and leaf lists and its scratch.
///
/// Everything allocated from it lives until [`GraphArena::reset`], which
/// needs `&mut self`: the borrow checker guarantees no graph built in the
/// arena survives a reset. A reset keeps the arena's largest chunk, so after
/// the first build of a graph, rebuilding it allocates nothing from the heap.
///
/// ```
/// use gantry_arenas::GraphArena;
/// let mut arena = GraphArena::new();
/// let nodes = arena.alloc_slice_copy(&[1u32, 2, 3]);
/// assert_eq!(nodes, &[1, 2, 3]);
/// arena.reset(); // `nodes` can no longer be used here
/// assert_eq!(arena.allocated_bytes_in_use(), 0);
/// ```
#[derive(Default)]
pub struct GraphArena {
    bump: Bump,
}

impl GraphArena {
    /// An empty arena; its first allocation takes memory from the heap.
    pub fn new() -> Self {
        Self { bump: Bump::new() }
    }

    /// An arena with `bytes` reserved up front.
    pub fn with_capacity(bytes: usize) -> Self {
        Self { bump: Bump::with_capacity(bytes) }
    }

    /// Frees everything allocated since the last reset, keeping the memory.
    pub fn reset(&mut self) {
        self.bump.reset();
    }

    /// Copies `items` into the arena.
    pub fn alloc_slice_copy<T: Copy>(&self, items: &[T]) -> &[T] {
        self.bump.alloc_slice_copy(items)
    }

    /// A slice of `len` copies of `value` in the arena.
    pub fn alloc_slice_fill<T: Copy>(&self, len: usize, value: T) -> &mut [T] {
        self.bump.alloc_slice_fill_copy(len, value)
    }

    /// A growable vector in the arena (for lists whose length is found while building).
    pub fn vec<T>(&self) -> bumpalo::collections::Vec<'_, T> {
        bumpalo::collections::Vec::new_in(&self.bump)
    }

    /// A growable vector in the arena with room for `capacity` items.
    pub fn vec_with_capacity<T>(&self, capacity: usize) -> bumpalo::collections::Vec<'_, T> {
        bumpalo::collections::Vec::with_capacity_in(capacity, &self.bump)
    }

    /// Bytes handed out since the last reset (excluding chunk overhead).
    pub fn allocated_bytes_in_use(&self) -> usize {
        self.bump.allocated_bytes() - self.bump.chunk_capacity()
    }

    /// Bytes the arena holds from the heap, in use or not.
    pub fn allocated_bytes(&self) -> usize {
        self.bump.allocated_bytes()
    }

    /// The underlying bump allocator, for collections that take one.
    pub fn bump(&self) -> &Bump {
        &self.bump
    }
}

impl std::fmt::Debug for GraphArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphArena").field("allocated_bytes", &self.allocated_bytes()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_reuses_memory() {
        let mut arena = GraphArena::new();
        for _ in 0..3 {
            let v = arena.alloc_slice_fill(1000, 7u64);
            assert_eq!(v.len(), 1000);
            arena.reset();
        }
        let before = arena.allocated_bytes();
        let _ = arena.alloc_slice_fill(1000, 7u64);
        assert_eq!(arena.allocated_bytes(), before, "a reset arena must not grow for the same request");
    }

    #[test]
    fn vec_grows_in_arena() {
        let arena = GraphArena::new();
        let mut v = arena.vec();
        for i in 0..100 {
            v.push(i);
        }
        assert_eq!(v.into_bump_slice().iter().sum::<i32>(), 4950);
    }
}
