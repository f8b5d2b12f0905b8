//! The CPU backend's own threads: a [`JobSystem`] whose workers stay awake
//! while a graph computes, so handing a node's tasks to them costs a store
//! and a few hundred nanoseconds instead of a wake-up.
//!
//! Why not rayon's pool: its idle threads go to sleep within microseconds,
//! and a graph of a thousand small nodes (one decoded token) wakes them once
//! per node. On a virtual machine whose idle vCPUs halt, each wake-up took
//! about 25 µs (2-core AMD EPYC VM: a 30 µs task split in two, after 50 µs
//! of the caller's own work, took 90 µs instead of 65), which is about what
//! a token's products gain from a second thread: decoding ran no faster on
//! two threads than on one. ggml's thread pool spins for the same reason.
//!
//! The protocol ([`Team`]) is built from [`gantry_engine::sync`], so
//! `tests/loom_spin_pool.rs` checks it in every interleaving:
//! - the caller publishes a job (a pointer to its task on its own stack and
//!   a task counter), opens it and bumps the epoch; a worker that sees a new
//!   epoch joins the job if it is still open, takes tasks until none is
//!   left, and leaves; the caller takes tasks too, then closes the job and
//!   waits for the workers inside it, so no worker touches the job after
//!   `run` returns, and none that is slow to start holds the caller up;
//! - idle workers spin on the epoch for [`IDLE_SPIN`] ([`HOT_SPIN`] while
//!   [`JobSystem::enter`] runs, that is while a graph computes), then sleep
//!   on a condition variable, which the next job wakes.
//!
//! A job published while another is out (a task that runs a job, or two
//! callers at once) runs on its caller alone: correct, only slower.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
// The pool's threads are the OS's even under loom (whose models drive `Team` on threads of their own).
use std::thread as os_thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use gantry_engine::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use gantry_engine::sync::{Arc, Condvar, Mutex, lock, thread, wait};
use gantry_engine::{BackendErrorKind, Error, Result};

use super::jobs::JobSystem;

/// How long an idle worker outside [`JobSystem::enter`] spins before it
/// sleeps: long enough that the next graph of a decode loop (sampling and
/// scheduling between tokens take tens of microseconds) finds it awake,
/// short enough that a pool nobody uses costs nothing.
pub const IDLE_SPIN: Duration = Duration::from_micros(200);

/// Spins between two looks at the clock of an idle worker (one under loom,
/// where every spin is a step of the model).
const SPINS_PER_CLOCK: u32 = if cfg!(loom) { 1 } else { 64 };

/// Spins between two looks at shared state. Under loom a spin is a yield,
/// so that the model checker runs the other threads.
#[inline]
fn pause() {
    #[cfg(loom)]
    thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// One published job: the caller's task and its counter. It lives on the
/// caller's stack for as long as [`Team::run`] runs.
struct Job<'a> {
    task: &'a (dyn Fn(usize) + Sync),
    n_tasks: usize,
    next: AtomicUsize,
    /// The first panic of a task, raised again on the caller.
    panicked: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Job<'_> {
    /// Runs tasks until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n_tasks {
                return;
            }
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| (self.task)(i))) {
                lock(&self.panicked).get_or_insert(payload);
            }
        }
    }
}

/// What the caller and the workers of a [`SpinPool`] share: the job slot,
/// the word that announces a job (and counts the sleepers), the word that
/// says whether the job is open (and counts the workers inside it), and
/// the sleep.
///
/// Each handshake is a read-modify-write of one word, so it holds with
/// acquire/release ordering alone (which is also all loom models): a worker
/// joins by adding itself to `state`, and either the caller's close sees it
/// there or it sees the job closed; a worker about to sleep adds itself to
/// `announce`, and either the caller's announcement sees it there (and wakes
/// it) or it sees the new epoch.
///
/// The words live on cache lines of their own, grouped by who touches
/// them: idle workers read `announce` (and `shutdown`) on every spin, so a
/// caller's write to any word on that line took the line away from them
/// and cost a transfer back — with the words side by side, the eight
/// writes of one job (busy, hot, job, state, announce) were most of a
/// one-token product's hand-over on a 2-core Xeon VM.
pub struct Team {
    /// `epoch << SLEEPER_BITS | sleepers`: the epoch is bumped once per
    /// published job; sleepers are workers asleep or about to be.
    announce: CachePadded<AtomicUsize>,
    /// The job, on one line: what a joining worker reads, in that order.
    slot: CachePadded<Slot>,
    /// Nesting depth of [`JobSystem::enter`]: while above zero, idle
    /// workers spin for [`HOT_SPIN`] instead of [`IDLE_SPIN`].
    hot: CachePadded<AtomicUsize>,
    /// Whether a job is out (a second one then runs on its caller alone);
    /// callers' alone.
    busy: CachePadded<AtomicBool>,
    /// Read on every spin, written once: with the sleep, on a line of its own.
    shutdown: CachePadded<AtomicBool>,
    sleep: Mutex<()>,
    wake: Condvar,
    workers: usize,
}

/// The job slot of a [`Team`].
struct Slot {
    /// `OPEN` while a job may be joined, plus the number of workers inside.
    state: AtomicUsize,
    /// The published job (a `Job` on its caller's stack, its lifetime
    /// erased); read only by a worker that joined while `OPEN` was set.
    job: AtomicPtr<Job<'static>>,
}

/// Bits of [`Team::announce`] that count sleepers.
const SLEEPER_BITS: u32 = 16;
/// One epoch in [`Team::announce`].
const EPOCH: usize = 1 << SLEEPER_BITS;
/// The job in [`Team::state`] may be joined.
const OPEN: usize = 1 << (usize::BITS - 1);

/// The epoch part of an [`Team::announce`] word.
fn epoch_of(announce: usize) -> usize {
    announce >> SLEEPER_BITS
}

/// How long an idle worker spins before it sleeps while a graph computes:
/// far longer than the gaps between a graph's parallel nodes, but bounded,
/// so a compute that waits on something else (a GPU, an event) does not
/// keep a core busy for nothing.
pub const HOT_SPIN: Duration = Duration::from_millis(2);

// SAFETY: `job` points to a `Job` whose task is `Sync` and whose other
// fields are atomics or a mutex; a worker dereferences it only after joining
// an open job, and the caller keeps it alive until every joined worker left.
unsafe impl Send for Team {}
// SAFETY: as above.
unsafe impl Sync for Team {}

impl Team {
    /// The shared state of a caller and `workers` worker threads (fewer
    /// than 2^16).
    pub fn new(workers: usize) -> Self {
        Self {
            announce: CachePadded::new(AtomicUsize::new(0)),
            slot: CachePadded::new(Slot { state: AtomicUsize::new(0), job: AtomicPtr::new(std::ptr::null_mut()) }),
            hot: CachePadded::new(AtomicUsize::new(0)),
            busy: CachePadded::new(AtomicBool::new(false)),
            shutdown: CachePadded::new(AtomicBool::new(false)),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            workers: workers.min((1 << SLEEPER_BITS) - 1),
        }
    }

    /// Runs `task(i)` for every `i` in `0..n_tasks` on the caller and the
    /// workers, returning when all have returned (and no worker holds the
    /// task any more). A panicking task lets the others finish; the first
    /// panic is raised again here.
    ///
    /// The caller never waits for a worker that has not joined the job
    /// (asleep, or without a core): once it has no task left to take it
    /// closes the job and waits only for the workers inside.
    pub fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        let job = Job { task, n_tasks, next: AtomicUsize::new(0), panicked: Mutex::new(None) };
        if self.workers == 0 || n_tasks <= 1 || self.busy.swap(true, Ordering::Acquire) {
            job.work();
        } else {
            let erased = (&job as *const Job<'_>).cast::<Job<'static>>().cast_mut();
            self.slot.job.store(erased, Ordering::Relaxed);
            // Release: a worker that joins (acquiring `state`) sees `job`.
            self.slot.state.fetch_or(OPEN, Ordering::Release);
            let announced = self.announce.fetch_add(EPOCH, Ordering::AcqRel);
            if announced & (EPOCH - 1) > 0 {
                // Taking the lock means a worker that counted itself in is
                // waiting on the condition variable by now, not about to.
                let _guard = lock(&self.sleep);
                self.wake.notify_all();
            }
            job.work();
            let mut inside = self.slot.state.fetch_and(!OPEN, Ordering::AcqRel) & !OPEN;
            let mut spins = 0u32;
            while inside > 0 {
                spins = spins.wrapping_add(1);
                // A worker that lost its core gets it back sooner if we yield.
                if spins.is_multiple_of(1024) {
                    thread::yield_now();
                } else {
                    pause();
                }
                inside = self.slot.state.load(Ordering::Acquire) & !OPEN;
            }
            self.busy.store(false, Ordering::Release);
        }
        if let Some(payload) = job.panicked.into_inner().unwrap_or_else(|e| e.into_inner()) {
            resume_unwind(payload);
        }
    }

    /// Keeps idle workers spinning longer while `f` runs.
    pub fn hot<R>(&self, f: impl FnOnce() -> R) -> R {
        /// Ends the hot period also when `f` unwinds.
        struct Cool<'a>(&'a AtomicUsize);
        impl Drop for Cool<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Release);
            }
        }
        self.hot.fetch_add(1, Ordering::Acquire);
        let _cool = Cool(&self.hot);
        f()
    }

    /// A worker's life: wait for a new epoch, join the job if it is open,
    /// work on it, leave; until shutdown. An idle worker spins for
    /// `idle_spin` (`hot_spin` while [`Team::hot`] runs), then sleeps.
    pub fn work(&self, idle_spin: Duration, hot_spin: Duration) {
        let mut seen = 0;
        loop {
            let mut idle_since = None;
            let mut spins = 0u32;
            loop {
                let epoch = epoch_of(self.announce.load(Ordering::Acquire));
                if epoch != seen {
                    seen = epoch;
                    break;
                }
                if self.shutdown.load(Ordering::Acquire) {
                    return;
                }
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(SPINS_PER_CLOCK) {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    let limit = if self.hot.load(Ordering::Relaxed) > 0 { hot_spin } else { idle_spin };
                    if since.elapsed() >= limit {
                        self.sleep_until_new(seen);
                        idle_since = None;
                        continue;
                    }
                }
                pause();
            }
            if self.slot.state.fetch_add(1, Ordering::Acquire) & OPEN != 0 {
                // SAFETY: we joined an open job: its caller published `job`
                // before opening it (the acquire above sees that) and waits
                // in `run`, keeping it alive, until we leave below.
                unsafe { &*self.slot.job.load(Ordering::Relaxed) }.work();
            }
            self.slot.state.fetch_sub(1, Ordering::Release);
        }
    }

    /// Sleeps until the epoch moves past `seen` (or shutdown).
    fn sleep_until_new(&self, seen: usize) {
        let mut guard = lock(&self.sleep);
        let announced = self.announce.fetch_add(1, Ordering::AcqRel);
        if epoch_of(announced) == seen {
            while !self.shutdown.load(Ordering::Acquire) && epoch_of(self.announce.load(Ordering::Acquire)) == seen {
                guard = wait(&self.wake, guard);
            }
        }
        self.announce.fetch_sub(1, Ordering::AcqRel);
        drop(guard);
    }

    /// Tells the workers to leave [`Team::work`], waking the sleeping ones.
    pub fn shut_down(&self) {
        self.shutdown.store(true, Ordering::Release);
        let _guard = lock(&self.sleep);
        self.wake.notify_all();
    }
}

/// The CPU backend's own pool: `n_threads − 1` worker threads, the caller of
/// each job working as the last one. See the module documentation.
pub struct SpinPool {
    team: Arc<Team>,
    threads: Vec<os_thread::JoinHandle<()>>,
}

impl SpinPool {
    /// A pool that runs `n_threads` tasks at once (the caller's included):
    /// `n_threads − 1` threads named `gantry-cpu-<i>`.
    pub fn new(n_threads: usize) -> Result<Self> {
        crate::sysinfo::check_thread_count(n_threads.max(1))?;
        let workers = n_threads.max(1) - 1;
        let team = Arc::new(Team::new(workers));
        let mut pool = SpinPool { team, threads: Vec::with_capacity(workers) };
        let started = Arc::new(AtomicUsize::new(0));
        for i in 0..workers {
            let team = Arc::clone(&pool.team);
            let started = Arc::clone(&started);
            let handle = os_thread::Builder::new()
                .name(format!("gantry-cpu-{i}"))
                .spawn(move || {
                    started.fetch_add(1, Ordering::Release);
                    team.work(IDLE_SPIN, HOT_SPIN)
                })
                .map_err(|e| {
                    Error::backend_with_source("CPU", BackendErrorKind::Other, format!("thread pool: {e}"), e)
                })?;
            pool.threads.push(handle);
        }
        // Wait until every worker runs: each has then made what a thread
        // makes once (heap allocations among them) before the first compute,
        // so steady-state computes allocate nothing.
        while started.load(Ordering::Acquire) < workers {
            os_thread::sleep(Duration::from_micros(20));
        }
        Ok(pool)
    }
}

impl Drop for SpinPool {
    fn drop(&mut self) {
        self.team.shut_down();
        for handle in self.threads.drain(..) {
            // A worker never panics (tasks' panics are caught), so there is nothing to pass on.
            let _ = handle.join();
        }
    }
}

impl JobSystem for SpinPool {
    fn concurrency(&self) -> usize {
        self.team.workers + 1
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        self.team.run(n_tasks, task)
    }

    fn enter(&self, f: &mut (dyn FnMut() + Send)) {
        self.team.hot(f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    #[test]
    fn every_task_runs_once_hot_or_idle_with_sleeping_workers() {
        let pool = SpinPool::new(3).unwrap();
        assert_eq!(pool.concurrency(), 3);
        for round in 0..200 {
            let n = round % 17;
            let seen: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
            let job = || pool.run(n, &|i| _ = seen[i].fetch_add(1, Ordering::Relaxed));
            if round % 2 == 0 {
                pool.enter(&mut || job());
            } else {
                job();
            }
            assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1), "round {round}");
            if round % 50 == 49 {
                // Long enough for every worker to fall asleep.
                os_thread::sleep(IDLE_SPIN * 5);
            }
        }
    }

    #[test]
    fn tasks_run_on_several_threads() {
        let pool = SpinPool::new(2).unwrap();
        let names = Mutex::new(std::collections::BTreeSet::new());
        let started = AtomicUsize::new(0);
        pool.run(2, &|_| {
            started.fetch_add(1, Ordering::SeqCst);
            // Each task waits for the other, so two threads must run them.
            while started.load(Ordering::SeqCst) < 2 {
                std::hint::spin_loop();
            }
            lock(&names).insert(os_thread::current().name().map(str::to_owned));
        });
        assert_eq!(lock(&names).len(), 2);
    }

    #[test]
    fn a_job_from_inside_a_task_runs_inline() {
        let pool = SpinPool::new(2).unwrap();
        let total = AtomicUsize::new(0);
        pool.run(4, &|_| pool.run(3, &|_| _ = total.fetch_add(1, Ordering::Relaxed)));
        assert_eq!(total.load(Ordering::Relaxed), 12);
    }

    #[test]
    fn a_panicking_task_lets_the_others_finish_then_panics_on_the_caller() {
        let pool = SpinPool::new(2).unwrap();
        let done = AtomicUsize::new(0);
        let caught = catch_unwind(AssertUnwindSafe(|| {
            pool.run(8, &|i| {
                if i == 3 {
                    panic!("task three");
                }
                done.fetch_add(1, Ordering::Relaxed);
            })
        }));
        assert!(caught.is_err());
        assert_eq!(done.load(Ordering::Relaxed), 7);
        // The pool still works afterwards.
        let after = AtomicUsize::new(0);
        pool.run(5, &|_| _ = after.fetch_add(1, Ordering::Relaxed));
        assert_eq!(after.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn one_thread_starts_no_worker_and_dropping_joins_them() {
        let one = SpinPool::new(1).unwrap();
        assert_eq!((one.concurrency(), one.threads.len()), (1, 0));
        let sum = AtomicUsize::new(0);
        one.run(4, &|i| _ = sum.fetch_add(i, Ordering::Relaxed));
        assert_eq!(sum.load(Ordering::Relaxed), 6);
        let four = SpinPool::new(4).unwrap();
        os_thread::sleep(IDLE_SPIN * 3);
        drop(four);
    }
}
