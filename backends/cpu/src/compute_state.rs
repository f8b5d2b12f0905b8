//! The CPU backend's compute state (thread pool or job system, per-task
//! scratch, shared scratch) and the lock it lives behind: a compute holds the lock from its
//! first node to its last, and changing the thread count replaces the whole
//! state under the same lock, so no compute ever sees a pool of one size and
//! scratch of another. Generic over the pool and built from
//! [`gantry_engine::sync`], so `tests/loom_cpu.rs` checks the locking in
//! every interleaving with a stand-in pool (rayon's threads cannot run under
//! loom).

use std::sync::Arc;
// Not `sync::Mutex`: kernels lock it through `Par`, outside loom's models.
use std::sync::Mutex as StdMutex;

use gantry_engine::sync::{Mutex, lock};
use gantry_engine::{BackendErrorKind, Error, Result};
use rayon::ThreadPool;

use super::jobs::JobSystem;
use super::ops::rope_angles::RopeAngleMemo;
use super::parallel::PerThreadScratch;
use super::spin_pool::SpinPool;

/// The worker threads a compute state owns.
pub trait WorkerPool: Sized {
    /// A pool of `n_threads` threads (at least one).
    fn build(n_threads: usize) -> Result<Self>;

    /// Its number of threads.
    fn n_threads(&self) -> usize;
}

impl WorkerPool for ThreadPool {
    fn build(n_threads: usize) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n_threads)
            .thread_name(|i| format!("gantry-cpu-{i}"))
            .build()
            .map_err(|e| Error::backend_with_source("CPU", BackendErrorKind::Other, format!("thread pool: {e}"), e))?;
        // Every thread runs a job once now, so that threads still starting
        // (their names, stacks, queues: heap allocations) are done before the
        // first compute, and steady-state computes allocate nothing from the start.
        pool.broadcast(|_| ());
        Ok(pool)
    }

    fn n_threads(&self) -> usize {
        self.current_num_threads()
    }
}

/// A job system shared with its owner: the backend's own [`SpinPool`]
/// (built by [`WorkerPool::build`]), the host's rayon pool, or the host's
/// job system, handed in with [`SharedComputeState::with_pool`].
impl WorkerPool for Arc<dyn JobSystem> {
    fn build(n_threads: usize) -> Result<Self> {
        SpinPool::new(n_threads).map(|pool| Arc::new(pool) as Arc<dyn JobSystem>)
    }

    fn n_threads(&self) -> usize {
        self.concurrency()
    }
}

/// What one compute needs and keeps between computes: the pool and the
/// scratch memory (so steady-state computes allocate nothing).
pub struct ComputeState<P> {
    pool: P,
    /// Whether the pool is the host's: then the backend never replaces it.
    host_pool: bool,
    n_threads: usize,
    per_thread: PerThreadScratch,
    shared: Vec<f32>,
    /// ROPE's angle tables, reused by nodes and computes with the same positions.
    rope: StdMutex<RopeAngleMemo>,
}

impl<P: WorkerPool> ComputeState<P> {
    fn new(n_threads: usize) -> Result<Self> {
        // Before the pool or its scratch is sized by it.
        crate::sysinfo::check_thread_count(n_threads)?;
        let pool = P::build(n_threads)?;
        Ok(Self::over(pool, false))
    }

    fn over(pool: P, host_pool: bool) -> Self {
        let n_threads = pool.n_threads().max(1);
        // One slot more than the tasks at once: a host's job system may run
        // tasks on the calling thread beside its workers.
        let per_thread = PerThreadScratch::new(n_threads + usize::from(host_pool));
        Self { pool, host_pool, n_threads, per_thread, shared: Vec::new(), rope: Default::default() }
    }

    /// Whether the pool is the host's (see [`SharedComputeState::with_pool`]).
    pub fn is_host_pool(&self) -> bool {
        self.host_pool
    }

    /// The pool.
    pub fn pool(&self) -> &P {
        &self.pool
    }

    /// The number of threads kernels split work over.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// The number of per-thread scratch slots.
    pub fn scratch_slots(&self) -> usize {
        self.per_thread.threads()
    }

    /// Everything a compute uses, borrowed at once: the pool, its thread
    /// count, the per-task scratch, and what kernels keep between nodes.
    pub(crate) fn parts(&mut self) -> (&P, usize, &PerThreadScratch, KernelMemory<'_>) {
        let memory = KernelMemory { shared: &mut self.shared, rope_angles: Some(&self.rope) };
        (&self.pool, self.n_threads, &self.per_thread, memory)
    }
}

/// What the backend's kernels keep between nodes and computes, beside the
/// parallel context ([`crate::parallel::Par`]: only the job system and the
/// per-task scratch): the scratch a node's tasks share, and ROPE's angle
/// tables. Borrowed from the [`ComputeState`] for one compute.
pub struct KernelMemory<'a> {
    /// Scratch shared by one node's tasks; grown, never shrunk.
    pub shared: &'a mut Vec<f32>,
    /// ROPE's angle tables, reused by nodes (and computes) that rotate by the
    /// same positions; `None` computes each node's angles as it goes.
    pub rope_angles: Option<&'a StdMutex<RopeAngleMemo>>,
}

impl<'a> KernelMemory<'a> {
    /// Memory over `shared` alone (no angle tables kept): for code that runs
    /// the kernels outside a backend's compute state.
    pub fn scratch_only(shared: &'a mut Vec<f32>) -> Self {
        Self { shared, rope_angles: None }
    }
}

/// A [`ComputeState`] behind its lock.
pub struct SharedComputeState<P>(Mutex<ComputeState<P>>);

impl<P: WorkerPool> SharedComputeState<P> {
    /// A state with `n_threads` threads (`Err` for none, or when the pool
    /// cannot be built).
    pub fn new(n_threads: usize) -> Result<Self> {
        Ok(Self(Mutex::new(ComputeState::new(n_threads)?)))
    }

    /// A state over the host's `pool`: kernels split work over its threads
    /// and the backend starts none of its own. The thread count is the
    /// pool's; [`SharedComputeState::set_n_threads`] then fails.
    pub fn with_pool(pool: P) -> Self {
        Self(Mutex::new(ComputeState::over(pool, true)))
    }

    /// The number of threads kernels split work over now.
    pub fn n_threads(&self) -> usize {
        lock(&self.0).n_threads
    }

    /// Sets the number of threads: a new pool and new scratch, built while
    /// the lock is held, so a compute runs wholly on the old state or wholly
    /// on the new one. On `Err` the old state stays.
    pub fn set_n_threads(&self, n_threads: usize) -> Result<()> {
        let mut state = lock(&self.0);
        if state.host_pool && state.n_threads != n_threads {
            return Err(Error::Unsupported(format!(
                "this CPU backend runs on the host's threads (its pool or job system, {} at once); size those instead",
                state.n_threads
            )));
        }
        if state.n_threads != n_threads {
            *state = ComputeState::new(n_threads)?;
        }
        Ok(())
    }

    /// Runs `compute` with the state locked throughout: computes run one
    /// after the other, and the thread count cannot change under one.
    pub fn with<R>(&self, compute: impl FnOnce(&mut ComputeState<P>) -> R) -> R {
        compute(&mut lock(&self.0))
    }
}
