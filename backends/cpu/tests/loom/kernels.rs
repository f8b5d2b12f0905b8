//! Model checks (loom) of what the workers of one parallel CPU kernel share:
//! the task counter of the quantized matrix product
//! (`gantry_cpu::TaskCounter`), the home ranges of the repacked
//! one (`gantry_cpu::HomeRanges`) and the failure collector of the
//! row kernels (`gantry_cpu::FirstError`), each the real type, in
//! every interleaving of the calling thread and the pool threads.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p gantry-backends --test loom_cpu_kernels`.
#![cfg(loom)]

use gantry_cpu::{FirstError, HomeRanges, TaskCounter};
use gantry_engine::Error;
use gantry_engine::sync::atomic::{AtomicUsize, Ordering};
use gantry_engine::sync::{Arc, Mutex, lock, thread};
use loom::cell::UnsafeCell;

/// Tasks of the model product: more than workers, so one takes several.
const TASKS: usize = 3;
/// Pool threads besides the calling one (which works too, as in rayon); one
/// more makes the model run minutes instead of seconds.
const SPAWNED: usize = 1;

/// Hands out task numbers to the workers (numbered from 0, the caller).
trait Dispenser: Send + Sync + 'static {
    fn new(count: usize) -> Self;
    fn take(&self, worker: usize) -> Option<usize>;
}

impl Dispenser for TaskCounter {
    fn new(count: usize) -> Self {
        TaskCounter::new(count)
    }

    fn take(&self, _: usize) -> Option<usize> {
        TaskCounter::take(self)
    }
}

impl Dispenser for HomeRanges {
    fn new(count: usize) -> Self {
        // One home per worker: each takes its own front, then the other's back.
        HomeRanges::new(count, SPAWNED + 1)
    }

    fn take(&self, worker: usize) -> Option<usize> {
        HomeRanges::take(self, worker)
    }
}

/// A wrong counter for the model to catch: it reads, then writes the next
/// number, so two workers can read the same one.
struct LoadThenStore {
    next: AtomicUsize,
    count: usize,
}

impl Dispenser for LoadThenStore {
    fn new(count: usize) -> Self {
        Self { next: AtomicUsize::new(0), count }
    }

    fn take(&self, _: usize) -> Option<usize> {
        let task = self.next.load(Ordering::Relaxed);
        self.next.store(task + 1, Ordering::Relaxed);
        (task < self.count).then_some(task)
    }
}

/// The model's `dst`: one cell per task, written by the worker that took
/// the task (the real kernel writes through a raw pointer on the same
/// promise: a task's part of `dst` is written by one thread only).
struct Dst(Vec<UnsafeCell<usize>>);

// SAFETY: every access goes through loom's `with`/`with_mut`, which report
// two unordered accesses (one a write) as a data race instead of allowing them.
unsafe impl Sync for Dst {}

/// Runs the workers of one product: each takes tasks until none is left and
/// writes its result (`task + 1`) into the task's cell; returns once all
/// have joined (what rayon's `for_each` does), with the tasks each took.
fn product<D: Dispenser>(tasks: &Arc<D>, dst: &Arc<Dst>) -> Vec<usize> {
    let worker = |tasks: Arc<D>, dst: Arc<Dst>, me: usize| {
        move || {
            let mut took = Vec::new();
            while let Some(t) = tasks.take(me) {
                // SAFETY: loom reports a concurrent access to this cell.
                dst.0[t].with_mut(|p| unsafe { *p += t + 1 });
                took.push(t);
            }
            took
        }
    };
    let handles: Vec<_> = (0..SPAWNED).map(|w| thread::spawn(worker(tasks.clone(), dst.clone(), w + 1))).collect();
    let mut took = worker(tasks.clone(), dst.clone(), 0)();
    for h in handles {
        took.extend(h.join().unwrap());
    }
    took
}

fn every_task_once<D: Dispenser>() {
    loom::model(|| {
        let tasks = Arc::new(D::new(TASKS));
        let dst = Arc::new(Dst((0..TASKS).map(|_| UnsafeCell::new(0)).collect()));
        let mut took = product(&tasks, &dst);
        took.sort_unstable();
        assert_eq!(took, (0..TASKS).collect::<Vec<_>>(), "each task handed out exactly once");
        for (t, cell) in dst.0.iter().enumerate() {
            // SAFETY: every worker has joined.
            assert_eq!(cell.with(|p| unsafe { *p }), t + 1, "task {t} done once before the product returned");
        }
        assert_eq!(tasks.take(0), None, "nothing handed out after the end");
    });
}

#[test]
fn task_counter_hands_out_every_task_exactly_once() {
    every_task_once::<TaskCounter>();
}

/// Each worker takes the front of its own range and, once that is empty,
/// the back of the other's: every task exactly once however they race.
#[test]
fn home_ranges_hand_out_every_task_exactly_once() {
    every_task_once::<HomeRanges>();
}

/// The model can fail: the counter that loads and then stores is caught
/// (two workers take the same task and write its cell concurrently).
#[test]
#[should_panic(expected = "Causality violation")]
fn a_load_then_store_counter_is_caught() {
    every_task_once::<LoadThenStore>();
}

/// Collects the failures of racing workers.
trait Failures: Default + Send + Sync + 'static {
    fn note(&self, r: Result<(), Error>);
    fn take(&self) -> Option<(usize, Error)>;
}

impl Failures for FirstError {
    fn note(&self, r: Result<(), Error>) {
        FirstError::note(self, r)
    }

    fn take(&self) -> Option<(usize, Error)> {
        FirstError::take(self)
    }
}

/// A wrong collector for the model to catch: it counts outside its lock,
/// reading and then writing the count, so a racing failure can go uncounted.
#[derive(Default)]
struct CountOutsideTheLock {
    count: AtomicUsize,
    first: Mutex<Option<Error>>,
}

impl Failures for CountOutsideTheLock {
    fn note(&self, r: Result<(), Error>) {
        if let Err(e) = r {
            let n = self.count.load(Ordering::Relaxed);
            self.count.store(n + 1, Ordering::Relaxed);
            lock(&self.first).get_or_insert(e);
        }
    }

    fn take(&self) -> Option<(usize, Error)> {
        let first = lock(&self.first).take()?;
        Some((self.count.load(Ordering::Relaxed), first))
    }
}

/// The error worker `w` raises on item `i`.
fn raised(w: usize, i: usize) -> Error {
    Error::Unsupported(format!("worker {w} item {i}"))
}

/// Three workers over two items each: worker 0 succeeds, workers 1 and 2
/// each fail on their second item. After the join, exactly the two failures
/// are counted (none lost), the error reported is one of them, whole, and
/// taking again reports nothing (nothing reported twice).
fn one_reported_none_lost<F: Failures>() {
    loom::model(|| {
        let failed = Arc::new(F::default());
        let worker = |w: usize, failed: Arc<F>| {
            move || {
                for i in 0..2 {
                    failed.note(if w > 0 && i == 1 { Err(raised(w, i)) } else { Ok(()) });
                }
            }
        };
        let handles: Vec<_> = (1..3).map(|w| thread::spawn(worker(w, failed.clone()))).collect();
        worker(0, failed.clone())();
        for h in handles {
            h.join().unwrap();
        }
        let (n, first) = failed.take().expect("two workers failed: an error is reported");
        assert_eq!(n, 2, "every failure counted");
        let message = first.to_string();
        assert!(
            message == raised(1, 1).to_string() || message == raised(2, 1).to_string(),
            "the reported error is one that was raised: {message}"
        );
        assert!(failed.take().is_none(), "reported once");
    });
}

#[test]
fn first_error_reports_one_and_counts_all() {
    one_reported_none_lost::<FirstError>();
}

/// The model can fail: counting outside the lock loses a failure.
#[test]
#[should_panic(expected = "every failure counted")]
fn counting_outside_the_lock_is_caught() {
    one_reported_none_lost::<CountOutsideTheLock>();
}

/// Workers that all succeed: nothing is reported.
#[test]
fn first_error_reports_nothing_without_failures() {
    loom::model(|| {
        let failed = Arc::new(FirstError::default());
        let other = {
            let failed = failed.clone();
            thread::spawn(move || failed.note(Ok::<_, Error>(())))
        };
        failed.note(Ok::<_, Error>(()));
        other.join().unwrap();
        assert!(failed.take().is_none());
    });
}
