//! Tasks handed out in contiguous home ranges, one per task of the job
//! system, with stealing from the back: the task dispenser of a kernel that
//! streams memory (a one-token product reading its weights).
//!
//! Why not [`TaskCounter`](super::TaskCounter): with a shared counter two
//! threads take tasks 0, 2, 4, … and 1, 3, 5, …, so each thread's reads
//! jump over the other's and every task starts a new stream that the
//! hardware prefetcher has to find again. SmolLM2's 120 one-token
//! products (Q4_1, repacked) on the 2 threads of a Xeon VM read their 66 MB
//! at 42 GB/s in tasks of an eighth of a matrix handed out in turn, and at
//! 47 GB/s in contiguous halves (the same bytes; 56 GB/s is a plain read).
//! Here home `h` is a contiguous range of tasks, taken front to back by the
//! task of the job system that has that home; once it is empty, that task
//! takes the last task of the fullest other range, so a thread that starts
//! late (or is slowed) still takes fewer tasks, as with the counter.
//!
//! Built from [`gantry_engine::sync`], so `tests/loom_cpu_kernels.rs`
//! checks it in every interleaving.

use gantry_engine::sync::atomic::{AtomicU64, Ordering};

/// Most homes; a job system with more threads has its extra tasks steal.
pub const MAX_HOMES: usize = 64;

/// One home's range, `front | back << 32` (task numbers, `front..back` left),
/// alone on its cache line: its owner takes from it without disturbing the
/// others' lines.
#[repr(align(64))]
#[derive(Debug)]
struct Home(AtomicU64);

fn pack(front: u32, back: u32) -> u64 {
    u64::from(front) | u64::from(back) << 32
}

fn unpack(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

/// Hands out the task numbers `0..count`, each exactly once over all the
/// threads that call [`HomeRanges::take`]: home `h` of `n` starts with the
/// tasks `h·count/n .. (h+1)·count/n`.
#[derive(Debug)]
pub struct HomeRanges {
    homes: [Home; MAX_HOMES],
    n_homes: usize,
}

impl HomeRanges {
    /// `count` tasks in `homes` ranges (at least 1, at most [`MAX_HOMES`]);
    /// `count` is at most `u32::MAX` (more are never handed out).
    pub fn new(count: usize, homes: usize) -> Self {
        let count = count.min(u32::MAX as usize);
        let n_homes = homes.clamp(1, MAX_HOMES);
        let bound = |h: usize| (h * count / n_homes) as u32;
        Self {
            homes: std::array::from_fn(|h| {
                Home(AtomicU64::new(if h < n_homes { pack(bound(h), bound(h + 1)) } else { 0 }))
            }),
            n_homes,
        }
    }

    /// The next task for the job system's task `home`: the front of its own
    /// range, else the back of the fullest other one; `None` when every
    /// range is empty (and so stays).
    ///
    /// The read-modify-writes are `Relaxed` for the reason
    /// [`TaskCounter::take`](super::TaskCounter::take) gives: what a task
    /// writes is published by the job system's join, not by this.
    pub fn take(&self, home: usize) -> Option<usize> {
        if let Some(own) = self.homes.get(home % MAX_HOMES).filter(|_| home < self.n_homes) {
            let mut v = own.0.load(Ordering::Relaxed);
            loop {
                let (front, back) = unpack(v);
                if front >= back {
                    break;
                }
                match own.0.compare_exchange_weak(v, pack(front + 1, back), Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => return Some(front as usize),
                    Err(now) => v = now,
                }
            }
        }
        self.steal()
    }

    /// The last task of the range with the most tasks left.
    fn steal(&self) -> Option<usize> {
        loop {
            let mut fullest: Option<(&Home, u64, u32)> = None;
            for h in &self.homes[..self.n_homes] {
                let v = h.0.load(Ordering::Relaxed);
                let (front, back) = unpack(v);
                let left = back.saturating_sub(front);
                if left > 0 && fullest.is_none_or(|(_, _, most)| left > most) {
                    fullest = Some((h, v, left));
                }
            }
            // Ranges only shrink: once all are seen empty, none fills again.
            let (h, v, _) = fullest?;
            let (front, back) = unpack(v);
            if h.0.compare_exchange_weak(v, pack(front, back - 1), Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                return Some(back as usize - 1);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    #[test]
    fn homes_are_contiguous_and_taken_front_to_back_then_stolen_from_the_back() {
        let r = HomeRanges::new(10, 3);
        // Home 0: 0..3, home 1: 3..6, home 2: 6..10.
        assert_eq!([r.take(0), r.take(0), r.take(2)], [Some(0), Some(1), Some(6)]);
        assert_eq!(
            [r.take(0), r.take(0)],
            [Some(2), Some(5)],
            "home 0 empty: steals the back of home 1 (3 left, as 2)"
        );
        assert_eq!(r.take(0), Some(9), "then of home 2 (3 left against 2)");
        let mut rest: Vec<usize> = std::iter::from_fn(|| r.take(1)).collect();
        rest.sort_unstable();
        assert_eq!(rest, [3, 4, 7, 8]);
        assert_eq!([r.take(0), r.take(1), r.take(2), r.take(70)], [None; 4]);
    }

    #[test]
    fn every_task_once_from_any_home_over_racing_threads() {
        for (count, homes, threads) in [(0, 2, 2), (1, 2, 3), (37, 2, 2), (100, 3, 4), (1000, 64, 8), (50, 100, 3)] {
            let r = HomeRanges::new(count, homes);
            let seen: Vec<AtomicU32> = (0..count).map(|_| AtomicU32::new(0)).collect();
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (r, seen) = (&r, &seen);
                    s.spawn(move || {
                        while let Some(i) = r.take(t) {
                            seen[i].fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            });
            assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1), "{count} {homes}");
        }
    }
}
