//! Splitting a kernel's work over the backend's job system (its rayon pool
//! or the host's [`JobSystem`]), with scratch per running task that is kept
//! between computes (no allocation in steady state).

use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use super::abort::Stop;
use super::jobs::{JobSystem, run_tasks};

/// Work (roughly: elements touched, or multiply-adds) below which a kernel
/// runs on the calling thread: waking the pool costs a few microseconds.
pub const MIN_WORK_PER_THREAD: usize = 64 * 1024;

/// The most work one chunk of [`Par::for_each`] does while an abort
/// callback is armed, in the same units: a few milliseconds, so a stop is
/// seen that soon inside one long node.
const MAX_WORK_PER_STOP_POLL: usize = 1 << 24;

/// One task's scratch, padded so neighbours do not share a cache line.
#[repr(align(128))]
struct Slot {
    /// Whether a running task holds this slot.
    taken: AtomicBool,
    floats: UnsafeCell<Vec<f32>>,
}

/// Scratch vectors, one per task that can run at once. A task takes a free
/// slot for as long as it runs (a job system gives no thread indices).
pub struct PerThreadScratch {
    slots: Box<[Slot]>,
}

// SAFETY: a slot's vector is only reached by the task that took the slot
// (its `taken` flag, set with acquire and cleared with release, hands it over).
unsafe impl Sync for PerThreadScratch {}

/// Gives a slot back when its task is done (also when it panics).
struct Taken<'a>(&'a Slot);

impl Slot {
    /// Takes the slot if no task holds it, its vector grown to at least
    /// `len` floats; the slot is free again when the guard drops.
    #[expect(clippy::mut_from_ref, reason = "the guard makes this caller the vector's only user until it drops")]
    fn take_grown(&self, len: usize) -> Option<(Taken<'_>, &mut Vec<f32>)> {
        self.taken.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).ok()?;
        let taken = Taken(self);
        // SAFETY: taken above; no one else reaches the vector until `taken` drops.
        let v = unsafe { &mut *self.floats.get() };
        if v.len() < len {
            v.resize(len, 0.0);
        }
        Some((taken, v))
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.0.taken.store(false, Ordering::Release);
    }
}

impl PerThreadScratch {
    /// Scratch for `n_tasks` tasks running at once.
    pub fn new(n_tasks: usize) -> Self {
        let slot = || Slot { taken: AtomicBool::new(false), floats: UnsafeCell::new(Vec::new()) };
        Self { slots: (0..n_tasks.max(1)).map(|_| slot()).collect() }
    }

    /// The number of slots.
    pub fn threads(&self) -> usize {
        self.slots.len()
    }

    /// Grows every slot that no task holds to at least `len` floats, from
    /// the thread that is about to hand tasks out. Tasks take whichever
    /// slot is free, so a slot that no task happened to take in a first
    /// compute (a worker that joined late) would otherwise grow in a later,
    /// steady-state one.
    fn reserve(&self, len: usize) {
        for slot in &self.slots {
            drop(slot.take_grown(len));
        }
    }

    /// Calls `f` with a free slot's scratch of at least `len` floats (grown
    /// once, then reused). A job system that runs more tasks at once than
    /// it said ([`JobSystem::concurrency`]) gets a fresh vector for the extra
    /// ones: correct, but not allocation-free.
    fn with_slot<R>(&self, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
        for slot in &self.slots {
            if let Some((_taken, v)) = slot.take_grown(len) {
                return f(&mut v[..len]);
            }
        }
        f(&mut vec![0.0; len])
    }
}

/// The parallel context a kernel runs in: the job system, how many tasks
/// this node's work is worth at most, and scratch.
pub struct Par<'a> {
    jobs: &'a dyn JobSystem,
    n_threads: usize,
    scratch: &'a PerThreadScratch,
    /// The compute's abort callback, polled between chunks; `None` when
    /// none is armed.
    stop: Option<&'a Stop>,
}

impl<'a> Par<'a> {
    /// A context over `jobs` (running `n_threads` tasks at once) and its scratch.
    pub fn new(jobs: &'a dyn JobSystem, n_threads: usize, scratch: &'a PerThreadScratch) -> Self {
        Self { jobs, n_threads: n_threads.max(1), scratch, stop: None }
    }

    /// A context over `jobs` that polls `stop` between the chunks of each
    /// kernel's work (if a callback is armed): `jobs` must be a job system
    /// under the same stop (see [`crate::CpuBackend`]'s computes). A stopped
    /// kernel leaves its output part written, and the node loop answers
    /// [`gantry_engine::ComputeStatus::Aborted`].
    pub(crate) fn with_stop(self, stop: &'a Stop) -> Self {
        Self { stop: stop.is_armed().then_some(stop), ..self }
    }

    /// Whether the compute has been told to stop (always `false` without an
    /// armed callback): drivers that loop over their own blocks poll it.
    pub fn should_stop(&self) -> bool {
        self.stop.is_some_and(Stop::poll)
    }

    /// Number of threads (tasks at once) work is split over.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// How many threads `work` units are worth.
    pub fn threads_for(&self, work: usize) -> usize {
        (work / MIN_WORK_PER_THREAD + 1).min(self.n_threads)
    }

    /// How many parts a driver that splits its own work (through
    /// [`Par::run`]) cuts `work` into: [`Par::threads_for`], or more while
    /// an abort callback is armed, so that a stop is seen between parts
    /// within a few milliseconds (1024 parts at most).
    pub fn parts_for(&self, work: usize) -> usize {
        let threads = self.threads_for(work);
        match self.stop {
            Some(_) => threads.max((work / MAX_WORK_PER_STOP_POLL).min(1024)),
            None => threads,
        }
    }

    /// Calls `f(range, tmp)` over ranges covering `0..n` (each item costing
    /// about `work_per_item`), through the job system when the work is large
    /// enough and on the calling thread otherwise. `tmp` is scratch of
    /// `tmp_len` floats held by that task alone; its contents are left over
    /// from earlier work.
    pub fn for_each<F>(&self, n: usize, work_per_item: usize, tmp_len: usize, f: F)
    where
        F: Fn(Range<usize>, &mut [f32]) + Sync,
    {
        if n == 0 {
            return;
        }
        let work = n.saturating_mul(work_per_item.max(1));
        let threads = self.threads_for(work).min(n);
        // With an abort callback armed, chunks small enough that a stop is
        // seen within a few milliseconds (the callback is polled before each).
        let stop_chunks = if self.stop.is_some() { work / MAX_WORK_PER_STOP_POLL } else { 0 };
        if threads <= 1 && stop_chunks <= 1 {
            self.scratch.with_slot(tmp_len, |tmp| f(0..n, tmp));
            return;
        }
        // A few chunks per thread balance uneven rows without much overhead.
        let n_chunks = (threads * 4).max(stop_chunks).min(n);
        let chunk = n.div_ceil(n_chunks);
        let n_chunks = n.div_ceil(chunk);
        let run_chunk = |c: usize| {
            let range = c * chunk..((c + 1) * chunk).min(n);
            self.scratch.with_slot(tmp_len, |tmp| f(range, tmp));
        };
        if threads <= 1 {
            // One thread: the chunks in turn on this one, stopping between.
            for c in 0..n_chunks {
                if self.should_stop() {
                    return;
                }
                run_chunk(c);
            }
            return;
        }
        self.scratch.reserve(tmp_len);
        self.run(n_chunks, &run_chunk);
    }

    /// Runs `f` on the calling thread with scratch of `tmp_len` floats held
    /// by it alone: for kernels that stay on one thread, and for the tasks
    /// of drivers that split their own work with [`Par::run`].
    pub fn inline<R>(&self, tmp_len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
        self.scratch.with_slot(tmp_len, f)
    }

    /// Makes the scratch of every task that can run at once at least
    /// `tmp_len` floats, before a driver hands out tasks that take it with
    /// [`Par::inline`]: grown in the first compute, whichever threads join.
    pub fn reserve_scratch(&self, tmp_len: usize) {
        self.scratch.reserve(tmp_len);
    }

    /// Runs `task(i)` for `i` in `0..n_tasks` through the job system (see
    /// [`run_tasks`]), for drivers that split their own work.
    pub fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        // Several tasks go through the job system, a stopping one that skips
        // those starting after the stop; `run_tasks` runs a single task
        // itself, so that one is checked here.
        if n_tasks == 1 && self.should_stop() {
            return;
        }
        run_tasks(self.jobs, n_tasks, task)
    }

    /// The same context over another job system (the profiler's, which
    /// times each task).
    pub fn with_jobs<'b>(&self, jobs: &'b dyn JobSystem) -> Par<'b>
    where
        'a: 'b,
    {
        Par { jobs, n_threads: self.n_threads, scratch: self.scratch, stop: self.stop }
    }

    /// The job system itself, for drivers that take one.
    pub fn jobs(&self) -> &'a dyn JobSystem {
        self.jobs
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

    #[test]
    fn reserving_grows_every_free_slot_and_skips_taken_ones() {
        let scratch = PerThreadScratch::new(3);
        // SAFETY: only slots that no task holds are read.
        let len = |i: usize| unsafe { (*scratch.slots[i].floats.get()).len() };
        scratch.with_slot(8, |_| {
            // Slot 0 is taken here: reserving leaves it alone.
            scratch.reserve(100);
            assert_eq!((len(1), len(2)), (100, 100));
        });
        assert_eq!(len(0), 8);
        scratch.reserve(50);
        assert_eq!([len(0), len(1), len(2)], [50, 100, 100]);
    }
}
