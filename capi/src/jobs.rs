//! The host's job system: a CPU backend whose kernels run as tasks the
//! host's own scheduler runs (a game engine's job system, a runtime's
//! executor), so Gantry starts no thread of its own.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gantry::backends::cpu::{CpuBackend, CpuDevice, CpuPlatform, JobSystem, max_threads};
use gantry::{Backend, SetAbortCallback, SetThreadCount, platform_extension};

use crate::backend::{BACKENDS, BackendEntry, GantryBackend};
use crate::entry::{Failure, entry};
use crate::ptr::{read_in, write_out};
use crate::reentry::in_callback;
use crate::status::GantryStatus;

/// One task of a compute: call it once with each index the job system was
/// given, from any thread.
pub type GantryTaskFn = unsafe extern "C" fn(task_data: *mut c_void, index: usize);

/// Runs `task(task_data, i)` for every `i` in `0..n_tasks`, on any threads
/// (the caller's included), in any order, and returns once every call has
/// returned. Tasks never wait for one another, so running them one after
/// the other on the calling thread is correct too. (Of a batch of at most
/// 4096 tasks, an index called twice runs once, and one never called runs
/// on the computing thread after `run` returns.) It runs in the middle of
/// a compute (its scheduler, graph and context held): a call into the API
/// from inside it, on the thread running it, returns
/// `GANTRY_ERROR_REENTRANT` (so a job system that runs other jobs while it
/// waits must not run jobs that call Gantry on that thread).
pub type GantryRunTasksFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, n_tasks: usize, task: GantryTaskFn, task_data: *mut c_void)>;

/// A host's job system, as `gantry_cpu_backend_new_with_jobs` takes it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GantryJobSystem {
    /// How many tasks run at the same time at most (at least 1): kernels
    /// split their work into about this many parts.
    pub concurrency: usize,
    /// The function that runs a batch of tasks.
    pub run: GantryRunTasksFn,
    /// Passed to `run` unchanged.
    pub user_data: *mut c_void,
}

/// The C job system behind the Rust trait.
struct CJobs {
    concurrency: usize,
    run: unsafe extern "C" fn(*mut c_void, usize, GantryTaskFn, *mut c_void),
    user_data: *mut c_void,
}

// SAFETY: `gantry_cpu_backend_new_with_jobs` documents that `run` is called
// from whichever thread computes, possibly several at once, for as long as
// the backend lives; the caller promises `user_data` is usable that way.
unsafe impl Send for CJobs {}
// SAFETY: as above.
unsafe impl Sync for CJobs {}

/// Tasks of one batch whose runs are tracked, one bit each: a host's job
/// system that skips a task, or runs one twice, cannot leave an output
/// unwritten or written twice. Batches of more tasks are run as given.
const TRACKED_TASKS: usize = 4096;

/// One batch as the host's `run` sees it (`task_data`): the Rust task and
/// which of its indices have run.
struct Batch<'a> {
    task: &'a (dyn Fn(usize) + Sync),
    n_tasks: usize,
    ran: [AtomicU64; TRACKED_TASKS / 64],
    tracked: bool,
}

impl Batch<'_> {
    /// Marks `index` run; false if it already had, or is not one of the
    /// batch's (a host's made-up index runs nothing).
    fn claim(&self, index: usize) -> bool {
        if index >= self.n_tasks {
            return false;
        }
        if !self.tracked {
            return true;
        }
        let Some(word) = self.ran.get(index / 64) else { return false };
        let bit = 1u64 << (index % 64);
        word.fetch_or(bit, Ordering::AcqRel) & bit == 0
    }

    /// Runs the task at `index`; a panic stops here: it never unwinds into
    /// the host's C code (the backend's tasks catch their own; this is the
    /// last line).
    fn run(&self, index: usize) {
        let _ = catch_unwind(AssertUnwindSafe(|| (self.task)(index)));
    }
}

/// Calls the Rust task behind `task_data` (a `Batch`), once per index.
unsafe extern "C" fn call_task(task_data: *mut c_void, index: usize) {
    // SAFETY: `CJobs::run` passes a pointer to a live `Batch` that outlives the batch.
    let batch = unsafe { &*(task_data as *const Batch<'_>) };
    if batch.claim(index) {
        batch.run(index);
    }
}

impl JobSystem for CJobs {
    fn concurrency(&self) -> usize {
        self.concurrency
    }

    fn run(&self, n_tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        let tracked = n_tasks <= TRACKED_TASKS;
        let batch = Batch { task, n_tasks, ran: std::array::from_fn(|_| AtomicU64::new(0)), tracked };
        let task_data = &batch as *const Batch<'_> as *mut c_void;
        // A kernel runs this in the middle of a compute (its scheduler,
        // graph and context locked): calls back into the API from `run` on
        // this thread are refused, not deadlocked.
        in_callback("the job system's run", || {
            // SAFETY: the caller of `gantry_cpu_backend_new_with_jobs` gave a
            // function of this signature that returns only once every task has
            // returned, so `batch` (on this stack frame) outlives every use.
            unsafe { (self.run)(self.user_data, n_tasks, call_task, task_data) }
        });
        // Tasks the host never ran run here, after it: their outputs would
        // be left as they were, a wrong answer with no error.
        if tracked {
            for index in 0..n_tasks {
                if batch.claim(index) {
                    batch.run(index);
                }
            }
        }
    }
}

/// A CPU backend on the host's job system `jobs` (copied): every kernel
/// that splits its work hands the parts to `jobs->run` and waits for them;
/// the backend starts no thread of its own. Its thread count is
/// `jobs->concurrency` (`gantry_backend_set_n_threads` then fails); the
/// abort callback works as on any CPU backend.
///
/// Threading: any thread. `jobs->run` is called from the thread that
/// computes (the caller of `gantry_scheduler_compute`), possibly from
/// several threads at once when several schedulers compute, for as long as
/// the backend (or anything made with it) lives. `jobs->concurrency` is 1 to
/// the most threads a CPU backend takes on this machine (four per hardware
/// thread, at least 64).
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `jobs` is null or points to a `GantryJobSystem` whose `run` keeps the
/// contract of `GantryRunTasksFn` and stays callable, with `user_data`,
/// until the backend and everything made with it are freed; `out` is null
/// or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_cpu_backend_new_with_jobs(
    jobs: *const GantryJobSystem,
    out: *mut GantryBackend,
) -> GantryStatus {
    entry("gantry_cpu_backend_new_with_jobs", || {
        // SAFETY: the caller's contract (null or a valid `GantryJobSystem`).
        let jobs = unsafe { read_in(jobs, "jobs")? };
        if out.is_null() {
            return Err(Failure::invalid("out is a null pointer"));
        }
        let run = jobs.run.ok_or_else(|| Failure::invalid("jobs->run is a null function"))?;
        // Kernels split their work, and size per-task scratch, by this count:
        // bounded as a CPU backend's own thread count is.
        let max = max_threads();
        if jobs.concurrency == 0 || jobs.concurrency > max {
            return Err(Failure::invalid(format!(
                "jobs->concurrency is {}: it must be 1 to {max} on this machine (at least one task must be able to \
                 run; more parts than that only cost memory)",
                jobs.concurrency
            )));
        }
        let c_jobs = CJobs { concurrency: jobs.concurrency, run, user_data: jobs.user_data };
        let backend: Arc<dyn Backend> = Arc::new(CpuBackend::with_job_system(CpuDevice::new(), Arc::new(c_jobs)));
        // The CPU platform's hooks (abort callback, thread count) fit this backend too.
        let platform = CpuPlatform::new();
        let entry = BackendEntry {
            backend,
            set_abort: platform_extension::<SetAbortCallback>(&platform).copied(),
            set_threads: platform_extension::<SetThreadCount>(&platform).copied(),
        };
        // SAFETY: the caller's contract.
        unsafe { write_out(out, GantryBackend { id: BACKENDS.insert(entry) }, "out") }
    })
}
