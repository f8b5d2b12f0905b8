//! A best-fit free-list allocator over virtual offsets, spread over chunks
//! (one per backend buffer), that never touches memory: it only plans.
//!
//! This is the planning half of ggml's `ggml_dyn_tallocr`: free blocks are
//! kept sorted by offset so a freed range merges with its neighbours in one
//! step, and a tensor never straddles two chunks. A chunk's last free block is
//! its tail, open up to the buffer type's maximum size; the chunk's size is the
//! highest offset ever handed out (its high-water mark).

/// Where a planned tensor lives: a chunk (the index of one buffer of the
/// buffer type) and a byte offset inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ChunkAddress {
    /// Index of the chunk (buffer) of the buffer type.
    pub chunk: u32,
    /// Byte offset inside the chunk.
    pub offset: usize,
}

/// A free byte range of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FreeBlock {
    offset: usize,
    size: usize,
}

/// One chunk: its free blocks (sorted by offset, never adjacent) and its high-water mark.
#[derive(Debug, Clone, Default)]
struct Chunk {
    free: Vec<FreeBlock>,
    high_water: usize,
}

/// Largest chunk size the planner works with, so that `offset + size` never overflows.
const MAX_CHUNK_SIZE: usize = usize::MAX / 4;

/// The planner of one buffer type. `reset` keeps every vector's capacity, so
/// planning the same graph again allocates nothing.
#[derive(Debug, Clone)]
pub(crate) struct ChunkedAllocator {
    alignment: usize,
    max_chunk_size: usize,
    /// Chunks in use are `chunks[..n_chunks]`; the rest are kept for their capacity.
    chunks: Vec<Chunk>,
    n_chunks: usize,
}

impl ChunkedAllocator {
    /// A planner for offsets aligned to `alignment` (a power of two; 0 or a
    /// non-power is treated as the next power of two) in chunks of at most
    /// `max_chunk_size` bytes.
    pub(crate) fn new(alignment: usize, max_chunk_size: usize) -> Self {
        Self {
            alignment: alignment.max(1).next_power_of_two(),
            max_chunk_size: max_chunk_size.clamp(1, MAX_CHUNK_SIZE),
            chunks: Vec::new(),
            n_chunks: 0,
        }
    }

    /// Forgets every allocation (keeps capacity).
    pub(crate) fn reset(&mut self) {
        self.n_chunks = 0;
    }

    /// `size` rounded up to the alignment: what a tensor of `size` bytes reserves.
    pub(crate) fn aligned(&self, size: usize) -> usize {
        size.checked_next_multiple_of(self.alignment).unwrap_or(MAX_CHUNK_SIZE).min(MAX_CHUNK_SIZE)
    }

    /// Number of chunks in use.
    pub(crate) fn n_chunks(&self) -> usize {
        self.n_chunks
    }

    /// Bytes chunk `c` needs: the highest end offset handed out in it.
    pub(crate) fn chunk_size(&self, c: usize) -> usize {
        if c < self.n_chunks { self.chunks[c].high_water } else { 0 }
    }

    /// Reserves `size` bytes (rounded up to the alignment): the best-fitting
    /// interior free block of any chunk; else the tail of the chunk that
    /// grows least (or fits tightest); else a new chunk.
    pub(crate) fn alloc(&mut self, size: usize) -> ChunkAddress {
        let size = self.aligned(size);
        if let Some((c, b)) = self.best_interior_block(size).or_else(|| self.best_tail_block(size)) {
            return self.take(c, b, size);
        }
        let c = self.new_chunk(size);
        self.take(c, 0, size)
    }

    /// The smallest block that is not a chunk's last and holds `size` bytes
    /// (on ties, the later one, as ggml).
    fn best_interior_block(&self, size: usize) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize, usize)> = None;
        for (c, chunk) in self.chunks[..self.n_chunks].iter().enumerate() {
            let interior = chunk.free.len().saturating_sub(1);
            for (b, block) in chunk.free[..interior].iter().enumerate() {
                if block.size >= size && best.is_none_or(|(_, _, s)| block.size <= s) {
                    best = Some((c, b, block.size));
                }
            }
        }
        best.map(|(c, b, _)| (c, b))
    }

    /// The chunk whose last block holds `size` bytes best: one that fits below
    /// the chunk's high-water mark with the least to spare, else the one that
    /// has to grow least.
    fn best_tail_block(&self, size: usize) -> Option<(usize, usize)> {
        // (chunk, fits without growing, spare bytes or growth)
        let mut best: Option<(usize, bool, usize)> = None;
        for (c, chunk) in self.chunks[..self.n_chunks].iter().enumerate() {
            let Some(block) = chunk.free.last() else { continue };
            if block.size < size {
                continue;
            }
            let end = block.offset + size;
            let candidate = if end <= chunk.high_water {
                (c, true, chunk.high_water - end)
            } else {
                (c, false, end - chunk.high_water)
            };
            let better = match best {
                None => true,
                Some((_, true, spare)) => candidate.1 && candidate.2 < spare,
                Some((_, false, growth)) => candidate.1 || candidate.2 < growth,
            };
            if better {
                best = Some(candidate);
            }
        }
        best.map(|(c, _, _)| (c, self.chunks[c].free.len() - 1))
    }

    /// Opens a chunk big enough for `size` bytes; it is larger than the
    /// maximum only when one tensor is (the buffer type then decides whether
    /// it can allocate that much).
    fn new_chunk(&mut self, size: usize) -> usize {
        let c = self.n_chunks;
        if c == self.chunks.len() {
            self.chunks.push(Chunk::default());
        }
        let chunk = &mut self.chunks[c];
        chunk.free.clear();
        chunk.free.push(FreeBlock { offset: 0, size: size.max(self.max_chunk_size) });
        chunk.high_water = 0;
        self.n_chunks += 1;
        c
    }

    fn take(&mut self, c: usize, b: usize, size: usize) -> ChunkAddress {
        let chunk = &mut self.chunks[c];
        let block = &mut chunk.free[b];
        let offset = block.offset;
        block.offset += size;
        block.size -= size;
        if block.size == 0 {
            chunk.free.remove(b);
        }
        chunk.high_water = chunk.high_water.max(offset + size);
        ChunkAddress { chunk: c as u32, offset }
    }

    /// Returns `size` bytes (rounded up to the alignment) at `at` to the free
    /// list, merging with the free neighbours.
    pub(crate) fn free(&mut self, at: ChunkAddress, size: usize) {
        let size = self.aligned(size);
        if size == 0 {
            return;
        }
        let chunk = &mut self.chunks[at.chunk as usize];
        let i = chunk.free.partition_point(|b| b.offset < at.offset);
        debug_assert!(i == chunk.free.len() || at.offset + size <= chunk.free[i].offset, "freeing a free range");
        let joins_prev = i > 0 && {
            let p = chunk.free[i - 1];
            debug_assert!(p.offset + p.size <= at.offset, "freeing a free range");
            p.offset + p.size == at.offset
        };
        let joins_next = i < chunk.free.len() && at.offset + size == chunk.free[i].offset;
        match (joins_prev, joins_next) {
            (true, true) => {
                let next = chunk.free.remove(i);
                chunk.free[i - 1].size += size + next.size;
            }
            (true, false) => chunk.free[i - 1].size += size,
            (false, true) => {
                chunk.free[i].offset = at.offset;
                chunk.free[i].size += size;
            }
            (false, false) => chunk.free.insert(i, FreeBlock { offset: at.offset, size }),
        }
    }

    /// Returns the tail of a reservation: `from..from + old` shrinks to
    /// `from..from + new`.
    pub(crate) fn shrink(&mut self, at: ChunkAddress, old: usize, new: usize) {
        let (old, new) = (self.aligned(old), self.aligned(new));
        if old > new {
            self.free(ChunkAddress { chunk: at.chunk, offset: at.offset + new }, old - new);
        }
    }

    /// Bytes free below the high-water mark of every chunk (for tests).
    #[cfg(test)]
    fn free_below_high_water(&self) -> usize {
        self.chunks[..self.n_chunks]
            .iter()
            .map(|c| {
                c.free
                    .iter()
                    .filter(|b| b.offset < c.high_water)
                    .map(|b| b.size.min(c.high_water - b.offset))
                    .sum::<usize>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(chunk: u32, offset: usize) -> ChunkAddress {
        ChunkAddress { chunk, offset }
    }

    #[test]
    fn sizes_are_aligned_and_offsets_packed() {
        let mut a = ChunkedAllocator::new(32, usize::MAX);
        assert_eq!(a.alloc(10), addr(0, 0));
        assert_eq!(a.alloc(33), addr(0, 32));
        assert_eq!(a.alloc(1), addr(0, 96));
        assert_eq!(a.chunk_size(0), 128);
        assert_eq!(a.n_chunks(), 1);
    }

    #[test]
    fn freed_neighbours_merge_into_one_block() {
        let mut a = ChunkedAllocator::new(16, usize::MAX);
        let x = a.alloc(16);
        let y = a.alloc(16);
        let z = a.alloc(16);
        let _keep = a.alloc(16);
        a.free(x, 16);
        a.free(z, 16);
        assert_eq!(a.chunks[0].free.len(), 3, "two holes and the tail");
        a.free(y, 16);
        assert_eq!(a.chunks[0].free[0], FreeBlock { offset: 0, size: 48 }, "x, y, z merged");
        assert_eq!(a.free_below_high_water(), 48);
        // A 48-byte tensor fits the merged hole exactly and does not grow the chunk.
        assert_eq!(a.alloc(48), addr(0, 0));
        assert_eq!(a.chunk_size(0), 64);
    }

    #[test]
    fn best_fit_picks_the_smallest_hole() {
        let mut a = ChunkedAllocator::new(1, usize::MAX);
        let big = a.alloc(100);
        let _s1 = a.alloc(1);
        let small = a.alloc(30);
        let _s2 = a.alloc(1);
        a.free(big, 100);
        a.free(small, 30);
        assert_eq!(a.alloc(25), small, "30-byte hole fits 25 bytes better than the 100-byte one");
        assert_eq!(a.alloc(90), big);
        assert_eq!(a.alloc(50).offset, 132, "no hole left for 50 bytes: the tail grows");
    }

    #[test]
    fn the_tail_grows_only_when_no_hole_fits() {
        let mut a = ChunkedAllocator::new(1, usize::MAX);
        let x = a.alloc(10);
        let _y = a.alloc(10);
        a.free(x, 10);
        assert_eq!(a.alloc(20), addr(0, 20));
        assert_eq!(a.chunk_size(0), 40);
    }

    #[test]
    fn freeing_the_last_tensor_rejoins_the_tail() {
        let mut a = ChunkedAllocator::new(1, 1000);
        let x = a.alloc(10);
        let y = a.alloc(10);
        a.free(y, 10);
        assert_eq!(a.chunks[0].free, vec![FreeBlock { offset: 10, size: 990 }]);
        a.free(x, 10);
        assert_eq!(a.chunks[0].free, vec![FreeBlock { offset: 0, size: 1000 }]);
        assert_eq!(a.chunk_size(0), 20, "the high-water mark stays");
    }

    #[test]
    fn chunks_respect_the_maximum_and_never_split_a_tensor() {
        let mut a = ChunkedAllocator::new(1, 100);
        assert_eq!(a.alloc(60), addr(0, 0));
        assert_eq!(a.alloc(60), addr(1, 0), "60 + 60 > 100: a second chunk");
        assert_eq!(a.alloc(40), addr(0, 60), "fits the first chunk's tail");
        assert_eq!(a.alloc(250), addr(2, 0), "a tensor larger than the maximum gets a chunk of its own");
        assert_eq!((a.chunk_size(0), a.chunk_size(1), a.chunk_size(2)), (100, 60, 250));
        a.free(addr(1, 0), 60);
        assert_eq!(a.alloc(30), addr(1, 0));
    }

    #[test]
    fn tail_choice_prefers_no_growth_then_least_growth() {
        let mut a = ChunkedAllocator::new(1, 100);
        let _a0 = a.alloc(90); // chunk 0: tail at 90, 10 left
        let b0 = a.alloc(50); // chunk 1
        let _b1 = a.alloc(10); // chunk 0 (fits the tail exactly: high water 100)
        a.free(b0, 50);
        // chunk 1 has only its tail (offset 0, high water 50): 40 bytes fit without growth.
        assert_eq!(a.alloc(40), addr(1, 0));
        // 20 bytes: chunk 1's tail at 40 fits below the high-water mark 50? no, 60 > 50: grows by 10.
        assert_eq!(a.alloc(20), addr(1, 40));
        assert_eq!(a.chunk_size(1), 60);
    }

    #[test]
    fn shrink_returns_the_tail() {
        let mut a = ChunkedAllocator::new(8, usize::MAX);
        let x = a.alloc(64);
        let _y = a.alloc(8);
        a.shrink(x, 64, 20);
        assert_eq!(a.chunks[0].free[0], FreeBlock { offset: 24, size: 40 });
    }

    #[test]
    fn reset_keeps_capacity() {
        let mut a = ChunkedAllocator::new(1, 10);
        for _ in 0..5 {
            a.alloc(10);
        }
        a.reset();
        assert_eq!(a.n_chunks(), 0);
        assert_eq!(a.chunks.len(), 5);
        assert_eq!(a.alloc(10), addr(0, 0));
    }

    mod random_sequences {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            /// Random allocations and frees: live ranges never overlap, never
            /// cross a chunk's end, and the free list stays sorted and merged.
            #[test]
            fn live_ranges_stay_disjoint(
                ops in prop::collection::vec((any::<bool>(), 0..400usize, any::<prop::sample::Index>()), 1..200),
                align_log in 0..7u32,
                max in 64..2048usize,
            ) {
                let align = 1 << align_log;
                let mut a = ChunkedAllocator::new(align, max);
                let mut live: Vec<(ChunkAddress, usize)> = vec![];
                // A chunk is larger than the maximum only to hold one larger tensor.
                let mut largest = max;
                for (alloc, size, pick) in ops {
                    if alloc || live.is_empty() {
                        largest = largest.max(a.aligned(size));
                        let at = a.alloc(size);
                        prop_assert_eq!(at.offset % align, 0);
                        live.push((at, a.aligned(size)));
                    } else {
                        let (at, size) = live.swap_remove(pick.index(live.len()));
                        a.free(at, size);
                    }
                    for (i, &(x, nx)) in live.iter().enumerate() {
                        let chunk = x.chunk as usize;
                        prop_assert!(x.offset + nx <= a.chunk_size(chunk), "past the chunk's size");
                        prop_assert!(a.chunk_size(chunk) <= largest, "chunk over the maximum");
                        for &(y, ny) in &live[i + 1..] {
                            // Zero-size reservations hold no bytes and overlap nothing.
                            let apart = nx == 0
                                || ny == 0
                                || x.chunk != y.chunk
                                || x.offset + nx <= y.offset
                                || y.offset + ny <= x.offset;
                            prop_assert!(apart, "{:?}+{} overlaps {:?}+{}", x, nx, y, ny);
                        }
                    }
                    for chunk in &a.chunks[..a.n_chunks] {
                        for w in chunk.free.windows(2) {
                            prop_assert!(w[0].offset + w[0].size < w[1].offset, "free blocks unsorted or unmerged");
                        }
                    }
                }
                // Freeing everything leaves one block per chunk.
                for (at, size) in live.drain(..) {
                    a.free(at, size);
                }
                for chunk in &a.chunks[..a.n_chunks] {
                    prop_assert_eq!(chunk.free.len(), 1);
                    prop_assert_eq!(chunk.free[0].offset, 0);
                }
            }
        }
    }
}
