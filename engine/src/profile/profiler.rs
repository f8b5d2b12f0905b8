//! The recorder: slices pushed into a buffer of fixed capacity (allocated
//! when the profiler is made, never grown), from any thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::{Slice, SliceKind};
use crate::Name;

/// Threads get their track numbers from here, once each, for the whole
/// process: the same OS thread is the same track in every profile.
static NEXT_THREAD: AtomicU16 = AtomicU16::new(1);

thread_local! {
    /// This thread's track number (0: none yet).
    static THREAD: Cell<u16> = const { Cell::new(0) };
}

/// Threads whose names a profiler records without locking (a bit each).
const KNOWN_THREAD_BITS: usize = 1024;

/// A thread track's name, as the profiler saw it first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadName {
    /// The track number ([`Slice::thread`]).
    pub thread: u16,
    /// The OS thread's name (`gantry-cpu-0`), or `thread <n>`.
    pub name: String,
}

/// Records [`Slice`]s (see [`crate::profile`]). Shared by the scheduler and
/// its backends through an `Arc`; any thread may record.
pub struct Profiler {
    epoch: Instant,
    slices: Mutex<Vec<Slice>>,
    capacity: usize,
    dropped: AtomicU64,
    processes: Mutex<Vec<String>>,
    threads: Mutex<Vec<ThreadName>>,
    known: Box<[AtomicU64]>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Profiler {
    /// A profiler holding up to `capacity` slices until they are drained
    /// (more are counted in [`Profiler::dropped`] and left out).
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            slices: Mutex::new(Vec::with_capacity(capacity)),
            capacity,
            dropped: AtomicU64::new(0),
            processes: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            known: (0..KNOWN_THREAD_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Nanoseconds since the profiler was made.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A new process track named `name` (a backend); returns its number.
    pub fn add_process(&self, name: &str) -> u16 {
        let mut processes = lock(&self.processes);
        processes.push(name.to_owned());
        (processes.len() - 1) as u16
    }

    /// The process tracks' names, by number.
    pub fn processes(&self) -> Vec<String> {
        lock(&self.processes).clone()
    }

    /// The thread tracks seen so far, in the order they first recorded.
    pub fn threads(&self) -> Vec<ThreadName> {
        lock(&self.threads).clone()
    }

    /// The calling thread's track number; the first time this profiler
    /// sees the thread, its name is noted (the only allocation while
    /// recording, once per thread).
    pub fn thread(&self) -> u16 {
        let id = THREAD.with(|t| {
            if t.get() == 0 {
                let next = NEXT_THREAD.fetch_add(1, Ordering::Relaxed).max(1);
                t.set(next);
            }
            t.get()
        });
        let (word, bit) = (usize::from(id) / 64, 1u64 << (id % 64));
        let known = self.known.get(word).is_some_and(|w| w.load(Ordering::Relaxed) & bit != 0);
        if !known {
            let mut threads = lock(&self.threads);
            if !threads.iter().any(|t| t.thread == id) {
                let name = std::thread::current().name().map_or_else(|| format!("thread {id}"), str::to_owned);
                threads.push(ThreadName { thread: id, name });
            }
            if let Some(w) = self.known.get(word) {
                w.fetch_or(bit, Ordering::Relaxed);
            }
        }
        id
    }

    /// Records `slice` (left out, and counted, when the buffer is full).
    pub fn record(&self, slice: Slice) {
        let mut slices = lock(&self.slices);
        if slices.len() < self.capacity {
            slices.push(slice);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records a slice of `kind` from `start_ns` to now on the calling
    /// thread of `process`.
    #[expect(clippy::too_many_arguments, reason = "one slice's fields, passed through from each recording site")]
    pub fn record_since(
        &self,
        kind: SliceKind,
        process: u16,
        op: &'static str,
        name: Name,
        index: u32,
        start_ns: u64,
        bytes: u64,
        flops: u64,
    ) {
        let end_ns = self.now_ns().max(start_ns);
        let thread = self.thread();
        self.record(Slice { kind, process, thread, op, name, index, start_ns, end_ns, bytes, flops });
    }

    /// Moves every slice recorded so far to the end of `out`, in the order
    /// recorded; the buffer keeps its capacity.
    pub fn drain(&self, out: &mut Vec<Slice>) {
        out.append(&mut lock(&self.slices));
    }

    /// Slices left out because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler").field("capacity", &self.capacity).field("dropped", &self.dropped()).finish()
    }
}

/// A profiler as one backend holds it: the recorder and the backend's
/// process track.
#[derive(Debug, Clone)]
pub struct BackendProfiler {
    /// The recorder.
    pub profiler: Arc<Profiler>,
    /// The backend's process track ([`Profiler::add_process`]).
    pub process: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_past_the_capacity_are_counted_not_kept() {
        let p = Profiler::new(2);
        let pid = p.add_process("CPU");
        for i in 0..3 {
            let t0 = p.now_ns();
            p.record_since(SliceKind::Node, pid, "ADD", Name::new("x"), i, t0, 8, 1);
        }
        let mut out = Vec::new();
        p.drain(&mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(p.dropped(), 1);
        assert!(out.iter().all(|s| s.end_ns >= s.start_ns && s.process == pid));
        assert_eq!(p.threads().len(), 1, "one thread recorded");
        assert_eq!(p.processes(), ["CPU"]);
    }

    #[test]
    fn each_thread_is_its_own_track() {
        let p = Profiler::new(16);
        let here = p.thread();
        let there = std::thread::scope(|s| s.spawn(|| p.thread()).join().unwrap());
        assert_ne!(here, there);
        assert_eq!(p.thread(), here);
        assert_eq!(p.threads().len(), 2);
    }
}
