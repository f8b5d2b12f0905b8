//! Model checks (loom) of the locks around a GPU's objects in the wgpu
//! backend (`gantry_engine::device_state`): the uncaptured-error log
//! (`ErrorLog`), the read-back staging buffer (`StagingSlot`) and the
//! stream's command recorder (`BatchRecorder`), each the real type, with
//! stand-ins for wgpu's objects (wgpu cannot run under loom), and each with
//! a deliberately broken variant that the model must catch.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p gantry-backends --test loom_gpu_locks`.
#![cfg(loom)]

use gantry_engine::Result;
use gantry_engine::device_state::{BatchRecorder, CommandBatch, ErrorLog, StagingSlot};
use gantry_engine::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use gantry_engine::sync::{Arc, Mutex, lock, thread};

// --- The uncaptured-error log -------------------------------------------

/// A log of errors pushed by the device's callback and taken by checks.
trait Log: Default + Send + Sync + 'static {
    fn push(&self, error: String);
    fn take(&self) -> Vec<String>;
}

impl Log for ErrorLog {
    fn push(&self, error: String) {
        ErrorLog::push(self, error)
    }
    fn take(&self) -> Vec<String> {
        ErrorLog::take(self).expect("not poisoned")
    }
}

/// A wrong log for the model to catch: a check copies the errors, then
/// clears the log in a second critical section, so a push in between is
/// lost and two checks in between both report the same errors.
#[derive(Default)]
struct CopyThenClear(Mutex<Vec<String>>);

impl Log for CopyThenClear {
    fn push(&self, error: String) {
        lock(&self.0).push(error);
    }
    fn take(&self) -> Vec<String> {
        let errors = lock(&self.0).clone();
        lock(&self.0).clear();
        errors
    }
}

/// wgpu's callback pushes two errors from its thread while two submitting
/// threads check; a last check after all have joined: every error is
/// reported by exactly one check (none lost, none twice), each check's
/// errors in the order pushed.
fn each_error_reported_once<L: Log>() {
    loom::model(|| {
        let log = Arc::new(L::default());
        let callback = {
            let log = log.clone();
            thread::spawn(move || {
                log.push("a".into());
                log.push("b".into());
            })
        };
        let checker = {
            let log = log.clone();
            thread::spawn(move || log.take())
        };
        let mut reports = vec![log.take()];
        callback.join().unwrap();
        reports.push(checker.join().unwrap());
        reports.push(log.take());
        for report in &reports {
            assert!(report.windows(2).all(|w| w[0] < w[1]), "errors reported out of order: {reports:?}");
        }
        let mut all: Vec<String> = reports.concat();
        all.sort();
        assert_eq!(all, ["a", "b"], "an error lost or reported twice: {reports:?}");
    });
}

#[test]
fn error_log_reports_each_error_once() {
    each_error_reported_once::<ErrorLog>();
}

/// The model can fail: copying and clearing under two locks is caught.
#[test]
#[should_panic(expected = "an error lost or reported twice")]
fn copy_then_clear_is_caught() {
    each_error_reported_once::<CopyThenClear>();
}

// --- The read-back staging buffer ---------------------------------------

/// A stand-in for a staging buffer: its size, which one it is, and whether
/// a reader has it mapped now.
struct FakeStaging {
    id: usize,
    size: u64,
    mapped: AtomicBool,
}

/// Uses `staging` as a read does (map, copy out, unmap): no other reader
/// may have it mapped meanwhile.
fn read_through(staging: &FakeStaging) {
    assert!(!staging.mapped.swap(true, Ordering::SeqCst), "two readers on one staging buffer");
    thread::yield_now();
    staging.mapped.store(false, Ordering::SeqCst);
}

/// Makes staging buffers of the size asked for, numbered in order made.
#[derive(Default)]
struct Maker(AtomicUsize);

impl Maker {
    fn make(&self, size: u64) -> Arc<FakeStaging> {
        let id = self.0.fetch_add(1, Ordering::SeqCst);
        Arc::new(FakeStaging { id, size, mapped: AtomicBool::new(false) })
    }
    fn made(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A device's read-back path: reads `need` bytes through a staging buffer
/// (kept if it fits, else made); returns the buffer read through.
trait ReadBack: Default + Send + Sync + 'static {
    fn read(&self, need: u64, maker: &Maker) -> Arc<FakeStaging>;
}

impl ReadBack for StagingSlot<Arc<FakeStaging>> {
    fn read(&self, need: u64, maker: &Maker) -> Arc<FakeStaging> {
        let mut slot = self.lock().expect("not poisoned");
        let staging = slot.fitting(|b| b.size >= need, || Ok::<_, ()>(maker.make(need))).unwrap();
        read_through(staging);
        staging.clone()
    }
}

/// A wrong read-back for the model to catch: it picks the buffer under the
/// lock but reads through it after letting go (not to block other reads
/// while waiting for the GPU), so two reads can share one buffer.
#[derive(Default)]
struct ReadAfterUnlock(StagingSlot<Arc<FakeStaging>>);

impl ReadBack for ReadAfterUnlock {
    fn read(&self, need: u64, maker: &Maker) -> Arc<FakeStaging> {
        let staging = {
            let mut slot = self.0.lock().expect("not poisoned");
            slot.fitting(|b| b.size >= need, || Ok::<_, ()>(maker.make(need))).unwrap().clone()
        };
        read_through(&staging);
        staging
    }
}

/// Two threads read at once, one small and one large: neither reads
/// through a buffer the other has mapped, each through one that fits. Then
/// the large buffer is kept and reused by a smaller read, and a larger read
/// replaces it with a new one, which is kept in turn.
fn staging_used_by_one_reader<R: ReadBack>() {
    loom::model(|| {
        let slot = Arc::new(R::default());
        let maker = Arc::new(Maker::default());
        let other = {
            let (slot, maker) = (slot.clone(), maker.clone());
            thread::spawn(move || slot.read(300, &maker))
        };
        let small = slot.read(100, &maker);
        let large = other.join().unwrap();
        assert!(small.size >= 100 && large.size >= 300, "a buffer too small");
        // Small first: it is replaced by the large one; large first: it is reused.
        let made = maker.made();
        assert_eq!(made, if small.id == large.id { 1 } else { 2 });

        let reused = slot.read(200, &maker);
        assert_eq!((reused.id, maker.made()), (large.id, made), "the kept buffer was not reused");
        let larger = slot.read(500, &maker);
        assert_eq!((larger.size, maker.made()), (500, made + 1), "a larger read did not replace the buffer");
        assert_eq!(slot.read(400, &maker).id, larger.id, "the replacement was not kept");
    });
}

#[test]
fn staging_slot_has_one_reader_at_a_time() {
    staging_used_by_one_reader::<StagingSlot<Arc<FakeStaging>>>();
}

/// The model can fail: reading after letting go of the slot is caught.
#[test]
#[should_panic(expected = "two readers on one staging buffer")]
fn reading_after_unlock_is_caught() {
    staging_used_by_one_reader::<ReadAfterUnlock>();
}

/// A failed make keeps the old buffer, and the next read makes it again.
#[test]
fn staging_slot_keeps_its_buffer_when_a_make_fails() {
    loom::model(|| {
        let slot = StagingSlot::<Arc<FakeStaging>>::default();
        let maker = Maker::default();
        let first = slot.read(100, &maker);
        let failed = slot.lock().unwrap().fitting(|b| b.size >= 500, || Err("out of memory")).map(|b| b.id);
        assert_eq!(failed, Err("out of memory"));
        assert_eq!(slot.read(50, &maker).id, first.id, "a failed make dropped the kept buffer");
    });
}

// --- The stream's command recorder --------------------------------------

/// One recorded command: which compute recorded it, and its step number.
type Step = (u32, u32);

/// A stand-in for the wgpu recorder: steps recorded since `begin`,
/// submitted as one batch to a queue shared with the device.
struct FakeRecorder {
    steps: Vec<Step>,
    queue: Arc<Mutex<Vec<Vec<Step>>>>,
}

impl CommandBatch for FakeRecorder {
    fn begin(&mut self, _max_steps: usize) -> Result<()> {
        self.steps.clear();
        Ok(())
    }
    fn submit(&mut self, _wait: bool) -> Result<()> {
        if !self.steps.is_empty() {
            lock(&self.queue).push(std::mem::take(&mut self.steps));
        }
        Ok(())
    }
}

/// A stream computing graphs of `steps` steps, numbered `id`.
trait Stream: Send + Sync + 'static {
    fn new(queue: Arc<Mutex<Vec<Vec<Step>>>>) -> Self;
    fn compute(&self, id: u32, steps: u32) -> Result<()>;
}

impl Stream for BatchRecorder<FakeRecorder> {
    fn new(queue: Arc<Mutex<Vec<Vec<Step>>>>) -> Self {
        BatchRecorder::new(FakeRecorder { steps: Vec::new(), queue })
    }
    fn compute(&self, id: u32, steps: u32) -> Result<()> {
        let batch = self.lock().expect("not poisoned");
        batch.record(steps as usize, false, |recorder| {
            for step in 0..steps {
                recorder.steps.push((id, step));
            }
            Ok(())
        })
    }
}

/// A wrong stream for the model to catch: the recorder is locked for each
/// call (begin, every step, submit), not for the whole compute.
struct LockPerCall(Mutex<FakeRecorder>);

impl Stream for LockPerCall {
    fn new(queue: Arc<Mutex<Vec<Vec<Step>>>>) -> Self {
        LockPerCall(Mutex::new(FakeRecorder { steps: Vec::new(), queue }))
    }
    fn compute(&self, id: u32, steps: u32) -> Result<()> {
        lock(&self.0).begin(steps as usize)?;
        for step in 0..steps {
            lock(&self.0).steps.push((id, step));
        }
        lock(&self.0).submit(false)
    }
}

/// Two threads compute a two-step graph each on one stream: the queue gets
/// two batches, each one compute's steps, whole and in order.
fn computes_do_not_interleave<S: Stream>() {
    loom::model(|| {
        let queue = Arc::new(Mutex::new(Vec::new()));
        let stream = Arc::new(S::new(queue.clone()));
        let other = {
            let stream = stream.clone();
            thread::spawn(move || stream.compute(2, 2))
        };
        stream.compute(1, 2).unwrap();
        other.join().unwrap().unwrap();
        let mut batches = lock(&queue).clone();
        batches.sort();
        assert_eq!(batches, [vec![(1, 0), (1, 1)], vec![(2, 0), (2, 1)]], "computes interleaved");
    });
}

#[test]
fn batch_recorder_keeps_computes_whole() {
    computes_do_not_interleave::<BatchRecorder<FakeRecorder>>();
}

/// The model can fail: locking the recorder per call is caught.
#[test]
#[should_panic(expected = "computes interleaved")]
fn locking_per_call_is_caught() {
    computes_do_not_interleave::<LockPerCall>();
}
