//! A global allocator that counts heap allocations, for the zero-allocation
//! tests of every crate, and measures a thread's peak heap use, for the
//! tests that bound the memory of untrusted work (a chat template's render).
//!
//! A test file installs it and reads the counters:
//!
//! ```ignore
//! use gantry_engine::testing::CountingAllocator;
//!
//! #[global_allocator]
//! static GLOBAL: CountingAllocator = CountingAllocator;
//!
//! let before = CountingAllocator::this_thread();
//! // ... the steady-state work ...
//! assert_eq!(CountingAllocator::this_thread() - before, 0);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Forwards to the system allocator, counting allocations and reallocations
/// two ways: per thread, always (the test harness runs other tests on other
/// threads, whose allocations must not count), and across every thread while
/// [`CountingAllocator::count_every_thread`] runs (for work spread over a
/// thread pool; a file using it should hold that one test alone).
pub struct CountingAllocator;

thread_local! {
    static THIS_THREAD: Cell<usize> = const { Cell::new(0) };
    /// Bytes the calling thread has allocated and not yet freed (it may go
    /// below zero: a thread may free what another allocated).
    static LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
    /// The most `LIVE_BYTES` has been since the last [`CountingAllocator::peak_bytes`] began.
    static PEAK_BYTES: Cell<isize> = const { Cell::new(0) };
}
static EVERY_THREAD_ON: AtomicBool = AtomicBool::new(false);
static EVERY_THREAD: AtomicUsize = AtomicUsize::new(0);

impl CountingAllocator {
    /// Allocations made so far by the calling thread.
    pub fn this_thread() -> usize {
        THIS_THREAD.with(Cell::get)
    }

    /// Runs `work` and returns its result with the allocations every thread
    /// made meanwhile.
    pub fn count_every_thread<R>(work: impl FnOnce() -> R) -> (R, usize) {
        EVERY_THREAD.store(0, Ordering::SeqCst);
        EVERY_THREAD_ON.store(true, Ordering::SeqCst);
        let result = work();
        EVERY_THREAD_ON.store(false, Ordering::SeqCst);
        (result, EVERY_THREAD.load(Ordering::SeqCst))
    }

    /// Runs `work` and returns its result with the most heap bytes the
    /// calling thread held at once meanwhile, above what it held before:
    /// the peak memory of single-threaded work.
    pub fn peak_bytes<R>(work: impl FnOnce() -> R) -> (R, usize) {
        let start = LIVE_BYTES.with(Cell::get);
        PEAK_BYTES.with(|p| p.set(start));
        let result = work();
        let peak = PEAK_BYTES.with(Cell::get);
        (result, usize::try_from(peak - start).unwrap_or(0))
    }

    /// Adds `delta` to the calling thread's live bytes, raising its peak.
    fn track_bytes(delta: isize) {
        // `try_with`: a thread being torn down has no thread-locals left.
        let _ = LIVE_BYTES.try_with(|live| {
            let now = live.get().wrapping_add(delta);
            live.set(now);
            let _ = PEAK_BYTES.try_with(|p| p.set(p.get().max(now)));
        });
    }

    fn count() {
        // `try_with`: a thread being torn down has no thread-locals left.
        let _ = THIS_THREAD.try_with(|c| c.set(c.get() + 1));
        if EVERY_THREAD_ON.load(Ordering::Relaxed) {
            EVERY_THREAD.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// SAFETY: forwards every call to the system allocator unchanged; counting uses a
// const-initialized thread-local and atomics, none of which allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::count();
        Self::track_bytes(layout.size().cast_signed());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::track_bytes(layout.size().cast_signed().wrapping_neg());
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::count();
        Self::track_bytes(new_size.cast_signed().wrapping_sub(layout.size().cast_signed()));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
