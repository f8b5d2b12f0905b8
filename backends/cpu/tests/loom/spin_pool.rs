//! Model checks (loom) of the CPU backend's own pool's protocol
//! (`gantry_cpu::Team`, the real type): a caller publishes jobs
//! and a worker joins them, in every interleaving, both with a worker that
//! falls asleep at once (the sleep and wake-up path) and with one that
//! spins. Each model checks that every task runs exactly once, and that no
//! task's write races the caller's read after `run` returned (loom's
//! `UnsafeCell` reports such an access as a causality violation) — which
//! is what would happen if the caller returned while the worker was still
//! inside the job.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --profile loom -p gantry-backends --test loom_spin_pool`.
#![cfg(loom)]

use std::time::Duration;

use gantry_cpu::Team;
use gantry_engine::sync::Arc;
use loom::cell::UnsafeCell;

/// Tasks per job: more than the two threads, so one takes several.
const TASKS: usize = 3;

/// One cell per task, written by whichever thread ran the task.
struct Cells(Vec<UnsafeCell<usize>>);

// SAFETY: every access goes through loom's `with`/`with_mut`, which report
// two unordered accesses (one a write) as a data race instead of allowing them.
unsafe impl Sync for Cells {}

/// Two jobs in a row from the caller, a worker of `spin` idle time beside
/// it, then shutdown.
fn two_jobs(spin: Duration, hot: bool) {
    let mut model = loom::model::Builder::new();
    // Spinning makes the interleavings unbounded; three preemptions cover
    // every ordering of the handshakes (publish/join, close/leave,
    // announce/sleep) that a race needs.
    model.preemption_bound = Some(3);
    model.check(move || {
        let team = Arc::new(Team::new(1));
        let worker = {
            let team = Arc::clone(&team);
            // More stack than loom's default: a task runs under `catch_unwind`.
            loom::thread::Builder::new().stack_size(1 << 20).spawn(move || team.work(spin, spin)).unwrap()
        };
        for round in 1..=2 {
            let cells = Cells((0..TASKS).map(|_| UnsafeCell::new(0)).collect());
            let cells = &cells;
            let job = || {
                team.run(TASKS, &|i| {
                    // SAFETY: loom reports a concurrent access to this cell.
                    cells.0[i].with_mut(|p| unsafe { *p += round })
                })
            };
            if hot {
                team.hot(job)
            } else {
                job()
            }
            for (i, cell) in cells.0.iter().enumerate() {
                // SAFETY: as above; `run` has returned, so no worker may still write.
                assert_eq!(cell.with(|p| unsafe { *p }), round, "task {i} of job {round} ran once");
            }
        }
        team.shut_down();
        worker.join().unwrap();
    });
}

#[test]
fn a_sleeping_worker_is_woken_and_never_outlives_the_job() {
    two_jobs(Duration::ZERO, false);
}

#[test]
fn a_spinning_worker_never_outlives_the_job() {
    two_jobs(Duration::from_secs(3600), true);
}
