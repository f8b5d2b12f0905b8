//! Model checks (loom) of the backends' shared state: the CPU backend's abort
//! callback slot and node loop (`gantry_cpu::{AbortSlot,
//! run_nodes}`, what `CpuBackend::compute_graph` runs), its compute state
//! lock (`gantry_cpu::SharedComputeState`, over a stand-in pool:
//! rayon cannot run under loom), and the events of the CPU and test GPU
//! devices used from several threads.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p gantry-backends --test loom_cpu`.
#![cfg(loom)]

use gantry_cpu::{AbortSlot, CpuDevice, SharedComputeState, Stop, WorkerPool, run_nodes};
use gantry_engine::sync::atomic::{AtomicBool, Ordering};
use gantry_engine::sync::{Arc, thread};
use gantry_engine::{AbortCallback, ComputeStatus, Device, Error, Result};
use gantry_testing::TestGpuDevice;

const NODES: [usize; 3] = [0, 1, 2];

/// A callback reading a flag another thread raises (what users install).
fn flag_callback(flag: &Arc<AtomicBool>) -> AbortCallback {
    let flag = flag.clone();
    std::sync::Arc::new(move || flag.load(Ordering::Acquire))
}

/// A node loop: nodes, the compute's callback, and the per-node work.
type NodeLoop = fn(&[usize], Option<&AbortCallback>, &mut dyn FnMut(usize) -> ComputeStatus) -> ComputeStatus;

/// The real loop.
fn real_loop(
    nodes: &[usize],
    abort: Option<&AbortCallback>,
    run: &mut dyn FnMut(usize) -> ComputeStatus,
) -> ComputeStatus {
    run_nodes(nodes, &Stop::new(abort.cloned()), run)
}

/// A wrong loop for the model to catch: it polls the callback once per
/// compute (a plausible "optimization"), not before every node.
fn poll_once_loop(
    nodes: &[usize],
    abort: Option<&AbortCallback>,
    run: &mut dyn FnMut(usize) -> ComputeStatus,
) -> ComputeStatus {
    if abort.is_some_and(|stop| stop()) {
        return ComputeStatus::Aborted;
    }
    run_nodes(nodes, &Stop::new(None), run)
}

/// The abort flag raised from another thread mid-compute: the compute either
/// finishes or stops before a node, never runs a node after one that saw the
/// flag raised; once the raiser is joined, the next compute runs no node.
fn abort_flag_raised_mid_compute(node_loop: NodeLoop) {
    loom::model(move || {
        let slot = Arc::new(AbortSlot::default());
        let flag = Arc::new(AtomicBool::new(false));
        slot.set(Some(flag_callback(&flag)));
        let raiser = {
            let flag = flag.clone();
            thread::spawn(move || flag.store(true, Ordering::Release))
        };
        let mut ran = Vec::new();
        let mut saw_flag_at = None;
        let status = node_loop(&NODES, slot.current().as_ref(), &mut |n| {
            ran.push(n);
            if saw_flag_at.is_none() && flag.load(Ordering::Acquire) {
                saw_flag_at = Some(n);
            }
            ComputeStatus::Success
        });
        match status {
            ComputeStatus::Success => assert_eq!(ran, NODES),
            ComputeStatus::Aborted => assert_eq!(ran, NODES[..ran.len()], "nodes run in order, then none"),
            other => panic!("{other:?}"),
        }
        if let Some(n) = saw_flag_at {
            assert_eq!(ran.last(), Some(&n), "a node ran after the flag was seen raised");
        }
        raiser.join().unwrap();
        let mut after = 0;
        let status = node_loop(&NODES, slot.current().as_ref(), &mut |_| {
            after += 1;
            ComputeStatus::Success
        });
        assert!(matches!(status, ComputeStatus::Aborted) && after == 0, "{status:?} after {after} nodes");
    });
}

#[test]
fn abort_flag_raised_mid_compute_stops_before_the_next_node() {
    abort_flag_raised_mid_compute(real_loop);
}

/// The model can fail: the loop that polls once is caught.
#[test]
#[should_panic(expected = "a node ran after the flag was seen raised")]
fn polling_once_per_compute_is_caught() {
    abort_flag_raised_mid_compute(poll_once_loop);
}

/// Installing and removing the callback while a compute takes it: the
/// compute polls either no callback or the complete one, and a compute that
/// starts after `set` returns sees what was set.
#[test]
fn callback_swapped_while_a_compute_starts() {
    loom::model(|| {
        let slot = Arc::new(AbortSlot::default());
        let stop_all: AbortCallback = std::sync::Arc::new(|| true);
        let setter = {
            let slot = slot.clone();
            thread::spawn(move || slot.set(Some(stop_all)))
        };
        let mut ran = 0;
        let status = run_nodes(&NODES, &Stop::new(slot.current()), |_| {
            ran += 1;
            ComputeStatus::Success
        });
        match status {
            ComputeStatus::Success => assert_eq!(ran, NODES.len()),
            ComputeStatus::Aborted => assert_eq!(ran, 0),
            other => panic!("{other:?}"),
        }
        setter.join().unwrap();
        assert!(matches!(
            run_nodes(&NODES, &Stop::new(slot.current()), |_| ComputeStatus::Success),
            ComputeStatus::Aborted
        ));
        slot.set(None);
        assert!(run_nodes(&NODES, &Stop::new(slot.current()), |_| ComputeStatus::Success).is_success());
    });
}

/// A failing node ends the loop with its status, even with a callback.
#[test]
fn first_failure_ends_the_loop() {
    loom::model(|| {
        let slot = AbortSlot::default();
        slot.set(Some(std::sync::Arc::new(|| false)));
        let mut ran = 0;
        let status = run_nodes(&NODES, &Stop::new(slot.current()), |n| {
            ran += 1;
            if n == 1 { ComputeStatus::Failed(Error::Aborted) } else { ComputeStatus::Success }
        });
        assert!(matches!(status, ComputeStatus::Failed(Error::Aborted)) && ran == 2);
    });
}

/// The CPU device's events used from two threads: one records and waits,
/// the other frees; every call ends with `Ok` or a stale-handle error.
#[test]
fn cpu_device_events_across_threads() {
    loom::model(|| {
        let device = CpuDevice::new();
        let e = device.event_new().unwrap();
        let other = {
            let device = device.clone();
            thread::spawn(move || device.event_free(e).unwrap())
        };
        for r in [device.event_synchronize(e), device.event_synchronize(e)] {
            assert!(matches!(r, Ok(()) | Err(Error::StaleHandle { kind: "event", .. })), "{r:?}");
        }
        other.join().unwrap();
        assert!(matches!(device.event_synchronize(e), Err(Error::StaleHandle { .. })));
        assert!(device.event_free(e).is_err(), "freed twice");
    });
}

/// The test GPU's events and node counter from two threads.
#[test]
fn test_gpu_events_and_counter_across_threads() {
    loom::model(|| {
        let device = TestGpuDevice::new("TestGPU", std::sync::Arc::new(|_| true));
        let a = device.event_new().unwrap();
        let worker = {
            let device = device.clone();
            thread::spawn(move || {
                let b = device.event_new().unwrap();
                device.computed.fetch_add(1, Ordering::Relaxed);
                device.event_synchronize(b).unwrap();
                b
            })
        };
        device.computed.fetch_add(1, Ordering::Relaxed);
        device.event_synchronize(a).unwrap();
        let b = worker.join().unwrap();
        assert_ne!(a, b);
        assert_eq!(device.computed.load(Ordering::Relaxed), 2);
        device.event_free(a).unwrap();
        device.event_free(b).unwrap();
    });
}

/// A stand-in for rayon's pool: only its size (what a compute must agree
/// with the scratch and the thread count on).
struct FakePool(usize);

impl WorkerPool for FakePool {
    fn build(n_threads: usize) -> Result<Self> {
        Ok(FakePool(n_threads))
    }

    fn n_threads(&self) -> usize {
        self.0
    }
}

/// What a compute runs with: the thread count it splits work by, the pool's
/// threads, and the per-thread scratch slots.
type Seen = (usize, usize, usize);

/// How a compute reaches the state.
type Compute = fn(&SharedComputeState<FakePool>) -> Seen;

/// The backend's way (`CpuBackend::compute_graph`): everything under one lock.
fn one_lock_compute(state: &SharedComputeState<FakePool>) -> Seen {
    state.with(|s| (s.n_threads(), s.pool().n_threads(), s.scratch_slots()))
}

/// A wrong way for the model to catch: the thread count is asked first (a
/// lock of its own), then the pool and scratch are locked.
fn two_lock_compute(state: &SharedComputeState<FakePool>) -> Seen {
    let n = state.n_threads();
    state.with(|s| (n, s.pool().n_threads(), s.scratch_slots()))
}

/// A compute racing `set_n_threads(3)` and a failing `set_n_threads(0)` on
/// a state of 2 threads: it runs wholly on the old state or wholly on the
/// new one; the failed change leaves the new state; a compute after the
/// setter is joined runs on 3 threads.
fn compute_vs_set_n_threads(compute: Compute) {
    loom::model(move || {
        let state = Arc::new(SharedComputeState::<FakePool>::new(2).unwrap());
        let setter = {
            let state = state.clone();
            thread::spawn(move || {
                state.set_n_threads(3).unwrap();
                assert!(state.set_n_threads(0).is_err(), "no threads is an error");
            })
        };
        let seen = compute(&state);
        assert!(seen == (2, 2, 2) || seen == (3, 3, 3), "a compute ran on a half-changed state: {seen:?}");
        setter.join().unwrap();
        assert_eq!(compute(&state), (3, 3, 3), "the failed change kept the last good state");
    });
}

#[test]
fn compute_runs_on_a_whole_state() {
    compute_vs_set_n_threads(one_lock_compute);
}

/// The model can fail: a compute that takes the thread count and the pool
/// under two locks is caught.
#[test]
#[should_panic(expected = "a compute ran on a half-changed state")]
fn a_compute_locking_twice_is_caught() {
    compute_vs_set_n_threads(two_lock_compute);
}
