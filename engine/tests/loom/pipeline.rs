//! Model checks (loom) of pipelined compute: the scheduler's copy-slot
//! protocol (`gantry_engine::sched::pipeline`, the code `compute_splits`
//! runs) and the device event table (`gantry_engine::EventTable`), in every
//! interleaving of a host thread and a device stream thread.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p gantry-engine --test loom_pipeline`.
//!
//! The stream below is the model of a device: a queue of work run in order
//! on its own thread, with events completed as the queue reaches them. The
//! copy slots are loom cells, so a host write into a slot the stream may
//! still be reading is a data race loom reports, whatever the timing.
#![cfg(loom)]

use std::collections::VecDeque;

use gantry_engine::sched::BackendIndex;
use gantry_engine::sched::pipeline::{PipelineStream, SlotGuard, event_index, next_copy};
use gantry_engine::sync::atomic::{AtomicBool, Ordering};
use gantry_engine::sync::{Arc, Condvar, Mutex, lock, thread, wait};
use gantry_engine::{Error, EventId, EventState, EventTable, Result, copy_or_fallback};
use loom::cell::UnsafeCell;

/// Work a model stream runs, in submission order.
enum Work {
    /// Compute from copy slot `slot`, which must hold run `run`'s input.
    Compute { slot: usize, run: usize },
    /// The stream copies run `run`'s input into `slot` itself.
    CopyIn { slot: usize, run: usize },
    /// Everything before this is done: complete the record.
    Record { event: EventId, ticket: u64 },
    /// Wait for record `ticket` of an event before going on.
    Wait { event: EventId, ticket: u64 },
    /// End the stream thread.
    Stop,
}

struct Queue {
    work: VecDeque<Work>,
    submitted: usize,
    done: usize,
}

/// The copy slots of one backend: the input of the run that last wrote it.
struct Slots(Vec<UnsafeCell<usize>>);

// SAFETY: every access goes through loom's `with`/`with_mut`, which report
// any two unordered accesses (one a write) as a data race instead of allowing them.
unsafe impl Sync for Slots {}

impl Slots {
    fn write(&self, slot: usize, run: usize) {
        // SAFETY: loom checks that no other access to this slot is concurrent.
        self.0[slot].with_mut(|p| unsafe { *p = run });
    }

    fn read(&self, slot: usize) -> usize {
        // SAFETY: as in `write`.
        self.0[slot].with(|p| unsafe { *p })
    }
}

/// A model device stream over a real [`EventTable`].
struct ModelStream {
    queue: Mutex<Queue>,
    /// Notified on submit and on each finished item.
    changed: Condvar,
    events: EventTable,
    slots: Slots,
    /// A fault to inject (loom must catch each).
    fault: Fault,
}

/// Deliberate protocol faults, to show the model catches them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// None: the real protocol.
    None,
    /// The host does not wait for events (a backend whose
    /// `event_synchronize` returns early): a data race on a slot.
    HostWaitReturnsEarly,
}

impl ModelStream {
    fn new(n_copies: usize, fault: Fault) -> Self {
        Self {
            queue: Mutex::new(Queue { work: VecDeque::new(), submitted: 0, done: 0 }),
            changed: Condvar::new(),
            events: EventTable::default(),
            slots: Slots((0..n_copies).map(|_| UnsafeCell::new(0)).collect()),
            fault,
        }
    }

    fn submit(&self, work: Work) {
        let mut q = lock(&self.queue);
        q.work.push_back(work);
        q.submitted += 1;
        drop(q);
        self.changed.notify_all();
    }

    /// The stream thread.
    fn run(&self) {
        loop {
            let work = {
                let mut q = lock(&self.queue);
                loop {
                    match q.work.pop_front() {
                        Some(w) => break w,
                        None => q = wait(&self.changed, q),
                    }
                }
            };
            match work {
                Work::Compute { slot, run } => {
                    assert_eq!(self.slots.read(slot), run, "run {run} found slot {slot} overwritten");
                }
                Work::CopyIn { slot, run } => self.slots.write(slot, run),
                Work::Record { event, ticket } => self.events.complete(event, ticket).unwrap(),
                Work::Wait { event, ticket } => self.events.wait_for(event, ticket).unwrap(),
                Work::Stop => return,
            }
            lock(&self.queue).done += 1;
            self.changed.notify_all();
        }
    }
}

impl PipelineStream for ModelStream {
    fn stream_wait(&self, event: EventId) -> Result<()> {
        // The record to wait for is the latest one now, not when the stream
        // gets there: by then this run has recorded the event again behind
        // the wait (loom found that deadlock in a first version).
        let ticket = self.events.latest(event)?;
        self.submit(Work::Wait { event, ticket });
        Ok(())
    }
    fn stream_record(&self, event: EventId) -> Result<()> {
        let ticket = self.events.record_pending(event)?;
        self.submit(Work::Record { event, ticket });
        Ok(())
    }
    fn host_wait(&self, event: EventId) -> Result<()> {
        if self.fault == Fault::HostWaitReturnsEarly {
            self.events.state(event).map(drop)
        } else {
            self.events.wait(event)
        }
    }
    fn host_synchronize(&self) -> Result<()> {
        let mut q = lock(&self.queue);
        while q.done < q.submitted {
            q = wait(&self.changed, q);
        }
        Ok(())
    }
}

/// How the split's input reaches its copy slot (the three paths of
/// `SlotGuard::copy_input` with `copy_or_fallback`, the steps of
/// `tensor_copy_async`).
#[derive(Clone, Copy)]
enum InputPath {
    /// A user input: the host copies it.
    User,
    /// An input from another backend the stream copies itself.
    StreamCopy,
    /// An input the stream cannot copy: the host copies it after syncing.
    HostFallback,
}

/// `runs` computes of a one-split graph on one backend with `n_copies`
/// pipeline copies, as `Scheduler::graph_compute_async` does them without
/// synchronizing in between; `use_events = false` is a device without events.
fn pipeline(n_copies: usize, runs: usize, path: InputPath, use_events: bool, fault: Fault) {
    let stream = Arc::new(ModelStream::new(n_copies, fault));
    let events: Vec<Option<EventId>> = (0..n_copies).map(|_| use_events.then(|| stream.events.create())).collect();
    let device = {
        let stream = stream.clone();
        thread::spawn(move || stream.run())
    };
    let mut copy = 0;
    for run in 1..=runs {
        let guard = SlotGuard { stream: &*stream, event: events[event_index(BackendIndex::new(0), copy, n_copies)] };
        let host_copy = || {
            stream.slots.write(copy, run);
            Ok(())
        };
        match path {
            InputPath::User => guard.copy_input(true, host_copy, |_| unreachable!()),
            InputPath::StreamCopy => guard.copy_input(
                false,
                || unreachable!(),
                |wait| {
                    copy_or_fallback(
                        || {
                            stream.submit(Work::CopyIn { slot: copy, run });
                            Ok(true)
                        },
                        || unreachable!(),
                        wait,
                        || unreachable!(),
                    )
                },
            ),
            InputPath::HostFallback => guard.copy_input(
                false,
                || unreachable!(),
                |wait| copy_or_fallback(|| Ok(false), || stream.host_synchronize(), wait, host_copy),
            ),
        }
        .unwrap();
        stream.submit(Work::Compute { slot: copy, run });
        guard.computed(true).unwrap();
        copy = next_copy(copy, n_copies);
    }
    stream.host_synchronize().unwrap();
    stream.submit(Work::Stop);
    device.join().unwrap();
}

/// Explores the interleavings of `f`, with at most 3 preemptions per
/// execution unless `LOOM_MAX_PREEMPTIONS` says otherwise (unbounded, the
/// pipeline models run for hours; the fault below is found within 2).
fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// Two copies, three runs: the third overwrites slot 0 while the stream may
/// still be computing run 1 from it, unless the event holds the host back.
#[test]
fn host_written_inputs_wait_for_the_slot_event() {
    check(|| pipeline(2, 3, InputPath::User, true, Fault::None));
}

#[test]
fn stream_copied_inputs_are_ordered_on_the_stream() {
    check(|| pipeline(2, 3, InputPath::StreamCopy, true, Fault::None));
}

#[test]
fn host_fallback_copies_wait_for_the_slot_event() {
    check(|| pipeline(2, 3, InputPath::HostFallback, true, Fault::None));
}

/// Without events the protocol synchronizes the whole stream instead.
#[test]
fn devices_without_events_synchronize_instead() {
    check(|| pipeline(2, 3, InputPath::User, false, Fault::None));
}

/// A single copy: every run reuses slot 0 and waits for the previous one.
#[test]
fn one_copy_waits_every_run() {
    check(|| pipeline(1, 2, InputPath::User, true, Fault::None));
}

/// The model can fail: with a host wait that does not wait, loom finds the
/// interleaving where run 3 overwrites slot 0 under run 1's compute.
#[test]
#[should_panic]
fn a_host_wait_that_returns_early_is_caught() {
    check(|| pipeline(2, 3, InputPath::User, true, Fault::HostWaitReturnsEarly));
}

/// A host waiting on an event is released only by the latest record: the
/// stream completes an earlier record first, and what it did between the two
/// must be visible once the wait returns.
#[test]
fn wait_returns_only_after_the_latest_record() {
    check(|| {
        let table = Arc::new(EventTable::default());
        let between = Arc::new(AtomicBool::new(false));
        let e = table.create();
        let first = table.record_pending(e).unwrap();
        let second = table.record_pending(e).unwrap();
        let stream = {
            let (table, between) = (table.clone(), between.clone());
            thread::spawn(move || {
                table.complete(e, first).unwrap();
                between.store(true, Ordering::Relaxed);
                table.complete(e, second).unwrap();
            })
        };
        table.wait(e).unwrap();
        assert!(between.load(Ordering::Relaxed), "the wait returned at the first record");
        assert_eq!(table.state(e).unwrap(), EventState::Complete);
        stream.join().unwrap();
    });
}

/// Freeing an event while another thread waits on it ends the wait with a
/// stale-handle error, never a hang; records racing the free either land or
/// see the stale id.
#[test]
fn free_while_waiting_is_an_error_not_a_hang() {
    check(|| {
        let table = Arc::new(EventTable::default());
        let e = table.create();
        table.record_pending(e).unwrap();
        let freer = {
            let table = table.clone();
            thread::spawn(move || table.free(e).unwrap())
        };
        let recorder = {
            let table = table.clone();
            thread::spawn(move || match table.record(e) {
                Ok(()) | Err(Error::StaleHandle { .. }) => {}
                Err(other) => panic!("{other}"),
            })
        };
        match table.wait(e) {
            Ok(()) | Err(Error::StaleHandle { kind: "event", .. }) => {}
            Err(other) => panic!("{other}"),
        }
        freer.join().unwrap();
        recorder.join().unwrap();
        assert!(matches!(table.state(e), Err(Error::StaleHandle { .. })));
    });
}
