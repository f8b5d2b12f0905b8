//! Two job systems as a host would write them, for tests and examples of
//! [`JobSystem`]: every task on the calling thread ([`InlineJobs`]), and
//! tasks spread over a pool of the host's own threads ([`HostJobs`]), which
//! the CPU backend reaches only through [`JobSystem::run`] (no rayon
//! shortcut: the backend's generic path, as with any foreign job system).
//! Both count the tasks they ran, so a test sees the backend used them.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::ThreadPool;

use gantry_cpu::JobSystem;

/// Runs every task on the calling thread, one after the other.
#[derive(Debug, Default)]
pub struct InlineJobs {
    tasks: AtomicU64,
}

impl InlineJobs {
    /// A job system that has run nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tasks run so far.
    pub fn tasks_run(&self) -> u64 {
        self.tasks.load(Ordering::Relaxed)
    }
}

impl JobSystem for InlineJobs {
    fn concurrency(&self) -> usize {
        // More than one, so kernels split their work into tasks at all.
        4
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        self.tasks.fetch_add(n_tasks as u64, Ordering::Relaxed);
        (0..n_tasks).for_each(task);
    }
}

/// Spreads tasks over threads the host made (a pool it built before
/// handing this to the backend), one spawned job per task in a scope.
#[derive(Debug)]
pub struct HostJobs {
    threads: ThreadPool,
    tasks: AtomicU64,
}

impl HostJobs {
    /// A job system over the host's `threads`.
    pub fn new(threads: ThreadPool) -> Self {
        Self { threads, tasks: AtomicU64::new(0) }
    }

    /// Tasks run so far.
    pub fn tasks_run(&self) -> u64 {
        self.tasks.load(Ordering::Relaxed)
    }
}

impl JobSystem for HostJobs {
    fn concurrency(&self) -> usize {
        self.threads.current_num_threads()
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        self.tasks.fetch_add(n_tasks as u64, Ordering::Relaxed);
        self.threads.scope(|s| {
            for i in 0..n_tasks {
                s.spawn(move |_| task(i));
            }
        });
    }
}
