//! The latest point a device's own submissions reached, on a queue it may
//! share with a host program.

use crate::sync::{Mutex, lock};

/// The queue point (of type `P`, the device's submission index) of the
/// latest submission this device made itself. A queue shared with a host
/// program also carries the host's work; waiting for this point waits for
/// everything Gantry submitted, and for no submission made after it (by
/// the host or anyone).
///
/// Submitting goes through [`OwnSubmissions::submit`], which holds the
/// lock around the submission itself: two of Gantry's threads submitting
/// at once store their points in queue order, so the point kept is always
/// the later one (submission indices need not be comparable for this).
#[derive(Debug)]
pub struct OwnSubmissions<P>(Mutex<Option<P>>);

impl<P> Default for OwnSubmissions<P> {
    fn default() -> Self {
        Self(Mutex::new(None))
    }
}

impl<P: Clone> OwnSubmissions<P> {
    /// Runs `submit` (which submits to the queue and returns its point)
    /// under the lock, keeps its point as the latest and returns it.
    /// `submit` must not call back into this table.
    pub fn submit(&self, submit: impl FnOnce() -> P) -> P {
        let mut latest = lock(&self.0);
        let point = submit();
        *latest = Some(point.clone());
        point
    }

    /// The point of the latest submission, `None` before the first.
    pub fn latest(&self) -> Option<P> {
        lock(&self.0).clone()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::OwnSubmissions;

    #[test]
    fn keeps_the_latest_of_concurrent_submissions() {
        // The "queue": a counter that hands out the next point, also used by
        // a "host" that submits without the table.
        let queue = Arc::new(AtomicU64::new(1));
        let own = Arc::new(OwnSubmissions::<u64>::default());
        assert_eq!(own.latest(), None);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (queue, own) = (queue.clone(), own.clone());
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        own.submit(|| queue.fetch_add(1, Ordering::SeqCst));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("submitting thread");
        }
        let last_own = queue.load(Ordering::SeqCst) - 1;
        assert_eq!(own.latest(), Some(last_own), "the latest own point is the last one handed out");
        // The host submits after: Gantry's latest point stays its own.
        queue.fetch_add(1, Ordering::SeqCst);
        assert_eq!(own.latest(), Some(last_own));
    }
}
