//! The task counter the workers of a parallel kernel share: each worker
//! takes the next task number until none is left, so a thread that starts
//! late (or runs slowly) simply takes fewer tasks. Built from
//! [`gantry_engine::sync`], so `tests/loom_cpu_kernels.rs` checks it in every
//! interleaving.

use gantry_engine::sync::atomic::{AtomicUsize, Ordering};

/// Hands out the task numbers `0..count`, each exactly once over all the
/// threads that call [`TaskCounter::take`].
#[derive(Debug)]
pub struct TaskCounter {
    next: AtomicUsize,
    count: usize,
}

impl TaskCounter {
    /// A counter over the tasks `0..count`.
    pub fn new(count: usize) -> Self {
        Self { next: AtomicUsize::new(0), count }
    }

    /// The next task not yet handed out, or `None` when every task has been.
    ///
    /// One read-modify-write: two threads never get the same number. It is
    /// `Relaxed` because the counter orders nothing but itself: what a task
    /// writes is published to the caller by the pool's join, not by this.
    /// Each worker calls this at most once after the tasks run out, so the
    /// counter stays below `count + threads` and cannot wrap.
    #[inline]
    pub fn take(&self) -> Option<usize> {
        let task = self.next.fetch_add(1, Ordering::Relaxed);
        (task < self.count).then_some(task)
    }
}
