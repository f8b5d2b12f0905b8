//! Splitting a kernel's work over the backend's rayon pool, with per-thread
//! scratch that is kept between computes (no allocation in steady state).

use std::cell::UnsafeCell;
use std::ops::Range;

use rayon::ThreadPool;
use rayon::prelude::*;

/// Work (roughly: elements touched, or multiply-adds) below which a kernel
/// runs on the calling thread: waking the pool costs a few microseconds.
pub const MIN_WORK_PER_THREAD: usize = 64 * 1024;

/// One thread's scratch, padded so neighbours do not share a cache line.
#[repr(align(128))]
struct Slot(UnsafeCell<Vec<f32>>);

/// Scratch vectors, one per pool thread. Slot `i` is only ever used by the
/// pool thread with index `i` (or, when a kernel runs on one thread while
/// no other kernel work runs, slot 0).
pub struct PerThreadScratch {
    slots: Box<[Slot]>,
}

// SAFETY: each slot is accessed by one thread at a time (see `slot`).
unsafe impl Sync for PerThreadScratch {}

impl PerThreadScratch {
    /// Scratch for `n_threads` threads.
    pub fn new(n_threads: usize) -> Self {
        Self { slots: (0..n_threads.max(1)).map(|_| Slot(UnsafeCell::new(Vec::new()))).collect() }
    }

    /// The number of slots (threads).
    pub fn threads(&self) -> usize {
        self.slots.len()
    }

    /// Thread `tid`'s scratch, at least `len` floats long (grown once, then reused).
    ///
    /// # Safety
    /// No other reference to slot `tid` may be alive: only the thread with
    /// that pool index calls this, and it does not start other work that could
    /// run on the same thread (no nested rayon calls) while using the slice.
    #[expect(
        clippy::mut_from_ref,
        reason = "per-thread scratch behind a shared pool: exclusivity is the caller's guarantee (see Safety)"
    )]
    unsafe fn slot(&self, tid: usize, len: usize) -> &mut [f32] {
        let slot = &self.slots[tid.min(self.slots.len() - 1)];
        // SAFETY: exclusive access to this slot is the caller's guarantee.
        let v = unsafe { &mut *slot.0.get() };
        if v.len() < len {
            v.resize(len, 0.0);
        }
        &mut v[..len]
    }
}

/// The parallel context a kernel runs in: the pool, its size, and scratch.
pub struct Par<'a> {
    pool: &'a ThreadPool,
    n_threads: usize,
    scratch: &'a PerThreadScratch,
}

impl<'a> Par<'a> {
    /// A context over `pool` (with `n_threads` threads) and its scratch.
    pub fn new(pool: &'a ThreadPool, n_threads: usize, scratch: &'a PerThreadScratch) -> Self {
        Self { pool, n_threads: n_threads.max(1), scratch }
    }

    /// Number of threads of the pool.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// How many threads `work` units are worth.
    pub fn threads_for(&self, work: usize) -> usize {
        (work / MIN_WORK_PER_THREAD + 1).min(self.n_threads)
    }

    /// Calls `f(range, tmp)` over ranges covering `0..n` (each item costing
    /// about `work_per_item`), on the pool when the work is large enough and
    /// on the calling thread otherwise. `tmp` is that thread's scratch of
    /// `tmp_len` floats; its contents are left over from earlier work.
    ///
    /// `f` must not call into rayon itself (the scratch slot is per thread).
    pub fn for_each<F>(&self, n: usize, work_per_item: usize, tmp_len: usize, f: F)
    where
        F: Fn(Range<usize>, &mut [f32]) + Sync,
    {
        if n == 0 {
            return;
        }
        let threads = self.threads_for(n.saturating_mul(work_per_item.max(1))).min(n);
        if threads <= 1 {
            // SAFETY: no other kernel work runs (kernels run one at a time, each
            // joins its parallel work before returning, and this one
            // dispatches nothing), so slot 0 is not in use.
            let tmp = unsafe { self.scratch.slot(0, tmp_len) };
            f(0..n, tmp);
            return;
        }
        // A few chunks per thread balance uneven rows without much overhead.
        let n_chunks = (threads * 4).min(n);
        let chunk = n.div_ceil(n_chunks);
        let n_chunks = n.div_ceil(chunk);
        self.pool.install(|| {
            (0..n_chunks).into_par_iter().for_each(|c| {
                let range = c * chunk..((c + 1) * chunk).min(n);
                let tid = rayon::current_thread_index().unwrap_or(0);
                // SAFETY: `tid` is this pool thread's own index and `f` makes no
                // nested rayon calls, so nothing else uses the slot meanwhile.
                let tmp = unsafe { self.scratch.slot(tid, tmp_len) };
                f(range, tmp);
            })
        });
    }

    /// Runs `f` on the calling thread with thread 0's scratch of `tmp_len`
    /// floats (for kernels that stay on one thread).
    pub fn inline<R>(&self, tmp_len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
        // SAFETY: no other kernel work runs (kernels run one at a time, each
        // joins its parallel work before returning, and this one dispatches
        // nothing while `f` runs), so slot 0 is not in use.
        let tmp = unsafe { self.scratch.slot(0, tmp_len) };
        f(tmp)
    }

    /// The pool itself, for drivers that split their own work over it.
    pub fn pool(&self) -> &'a ThreadPool {
        self.pool
    }

    /// Runs `f` inside the pool, so that libraries parallelizing with rayon
    /// (gemm) use this backend's threads.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }
}

/// A pointer that may cross threads. Kernels write disjoint parts of a
/// tensor from several threads through it.
#[derive(Clone, Copy, Debug)]
pub struct SendPtr<T>(pub *mut T);

impl<T> SendPtr<T> {
    /// The pointer. (A method, so closures capture the whole `SendPtr`
    /// rather than its non-`Send` field.)
    #[inline]
    pub fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: used only to hand out disjoint regions (or read-only ones) to the
// threads of one kernel, which all finish before the kernel returns.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn ranges_cover_everything_once() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let scratch = PerThreadScratch::new(3);
        let par = Par::new(&pool, 3, &scratch);
        for (n, work) in [(0, 1), (1, 1), (10, 1), (1000, 1_000_000), (7, 1_000_000)] {
            let seen = Mutex::new(vec![0u32; n]);
            par.for_each(n, work, 16, |r, tmp| {
                assert_eq!(tmp.len(), 16);
                let mut s = seen.lock().unwrap();
                for i in r {
                    s[i] += 1;
                }
            });
            assert!(seen.into_inner().unwrap().iter().all(|&c| c == 1), "n = {n}");
        }
    }
}
