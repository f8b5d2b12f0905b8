//! The threads the CPU kernels run on, as one small trait: a host's job
//! system (a game engine's task scheduler, a runtime's executor) implements
//! [`JobSystem`] and the CPU backend splits every kernel's work into its
//! tasks, starting no thread of its own. A rayon pool is one implementation
//! (the backend's own pool, or the host's through [`CpuBackend::with_pool`]).
//!
//! [`CpuBackend::with_pool`]: super::CpuBackend::with_pool

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Mutex;

use rayon::ThreadPool;
use rayon::prelude::*;

use super::abort::Stop;

/// Runs the tasks of the CPU kernels: a host's job system (see
/// [`CpuBackend::with_job_system`](super::CpuBackend::with_job_system)).
///
/// A kernel calls [`JobSystem::run`] with a task count about
/// [`JobSystem::concurrency`] (a few more, for balance) and a task that does
/// one part of its work; `run` returns once every task has. Tasks never wait
/// for one another, so running them one after the other on the calling
/// thread is correct too (only slower). A task that panics does not unwind
/// into the job system: the backend catches it, lets the other tasks finish
/// and fails the node with an error.
///
/// ```
/// use gantry_cpu::{CpuBackend, CpuDevice, JobSystem};
/// use std::sync::Arc;
///
/// /// The simplest job system: every task on the calling thread.
/// struct Inline;
/// impl JobSystem for Inline {
///     fn concurrency(&self) -> usize { 1 }
///     fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
///         (0..n_tasks).for_each(task)
///     }
/// }
/// let backend = CpuBackend::with_job_system(CpuDevice::new(), Arc::new(Inline));
/// assert_eq!(backend.n_threads(), 1);
/// ```
pub trait JobSystem: Send + Sync {
    /// How many tasks run at the same time at most: kernels split their
    /// work into about this many parts, and keep scratch memory for as many
    /// (at least 1).
    fn concurrency(&self) -> usize;

    /// Runs `task(i)` once for every `i` in `0..n_tasks`, on any threads
    /// (the caller's included), in any order, and returns when all have
    /// returned.
    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync));

    /// Calls `f` where a whole graph runs best. Rayon's pool runs it on one
    /// of its threads, which then takes part in every kernel's tasks instead
    /// of sleeping while they run; the default runs it on the caller.
    fn enter(&self, f: &mut (dyn FnMut() + Send)) {
        f()
    }

    /// The rayon pool behind this job system, if it is one: libraries that
    /// thread with rayon themselves (gemm's large products) then use its
    /// threads. Any other job system gets the work split into its tasks.
    fn rayon_pool(&self) -> Option<&ThreadPool> {
        None
    }

    /// Whether the compute these tasks belong to has been told to stop
    /// (its abort callback said so): kernels that loop over many small
    /// pieces within one task ask between pieces. The backend wraps the job
    /// system to answer it; a host's job system keeps the default, `false`.
    fn stopped(&self) -> bool {
        false
    }
}

/// A job system under a compute's [`Stop`]: a task that starts after the
/// stop does nothing, and [`JobSystem::stopped`] polls it.
pub(crate) struct StoppingJobs<'a> {
    pub(crate) inner: &'a dyn JobSystem,
    pub(crate) stop: &'a Stop,
}

impl JobSystem for StoppingJobs<'_> {
    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        self.inner.run(n_tasks, &|i| {
            if !self.stop.poll() {
                task(i);
            }
        })
    }

    fn enter(&self, f: &mut (dyn FnMut() + Send)) {
        self.inner.enter(f)
    }

    fn rayon_pool(&self) -> Option<&ThreadPool> {
        self.inner.rayon_pool()
    }

    fn stopped(&self) -> bool {
        self.stop.poll()
    }
}

impl JobSystem for ThreadPool {
    fn concurrency(&self) -> usize {
        self.current_num_threads()
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        // From one of this pool's threads (a graph entered below) this runs
        // at once; from elsewhere it hands the tasks over and waits.
        self.install(|| (0..n_tasks).into_par_iter().for_each(task));
    }

    fn enter(&self, f: &mut (dyn FnMut() + Send)) {
        self.install(f)
    }

    fn rayon_pool(&self) -> Option<&ThreadPool> {
        Some(self)
    }
}

/// Runs `task` over `0..n_tasks` through `jobs` (on the calling thread for
/// one task), keeping panics on our side of the job system: each task's
/// panic is caught, the others run on, and the first panic is raised again
/// on the calling thread once `run` has returned (where the node's guard
/// turns it into an error).
pub fn run_tasks(jobs: &dyn JobSystem, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
    match n_tasks {
        0 => {}
        1 => task(0),
        _ => {
            let panicked = Mutex::new(None);
            jobs.run(n_tasks, &|i| {
                if let Err(payload) = catch_unwind(AssertUnwindSafe(|| task(i))) {
                    let mut first = panicked.lock().unwrap_or_else(|e| e.into_inner());
                    first.get_or_insert(payload);
                }
            });
            if let Some(payload) = panicked.into_inner().unwrap_or_else(|e| e.into_inner()) {
                resume_unwind(payload);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    struct Inline;
    impl JobSystem for Inline {
        fn concurrency(&self) -> usize {
            1
        }
        fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
            (0..n_tasks).for_each(task)
        }
    }

    #[test]
    fn every_task_runs_once_on_either_kind() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        for jobs in [&pool as &dyn JobSystem, &Inline] {
            for n in [0, 1, 2, 17] {
                let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                run_tasks(jobs, n, &|i| {
                    seen[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1), "n = {n}");
            }
        }
    }

    #[test]
    fn a_panicking_task_lets_the_others_finish_then_panics_here() {
        let done = AtomicUsize::new(0);
        let caught = catch_unwind(AssertUnwindSafe(|| {
            run_tasks(&Inline, 4, &|i| {
                if i == 1 {
                    panic!("task one");
                }
                done.fetch_add(1, Ordering::Relaxed);
            })
        }));
        assert!(caught.is_err());
        assert_eq!(done.load(Ordering::Relaxed), 3);
    }
}
