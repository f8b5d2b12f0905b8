//! Calls into the API from inside a callback the API is running.
//!
//! Gantry calls the host's code back while it holds locks: the abort
//! callback runs in the middle of a compute (the scheduler, graph and context
//! locked by the thread that computes, which waits for the thread polling
//! it), the token callback in the middle of a generation (the model locked),
//! the job system's `run` in the middle of a kernel. A call from there that
//! took one of those locks would wait for itself: a deadlock. So every
//! callback runs inside [`in_callback`], which marks its thread, and
//! [`refuse_inside_callback`], checked by every entry point before anything
//! is locked, answers such a call with `GANTRY_ERROR_REENTRANT` instead.
//!
//! The mark is per thread: another thread calling the API while a callback
//! runs is not refused, and waits for the locks it needs as it would at any
//! other time. Only `gantry_last_error` and `gantry_status_name`, which take
//! no lock, are answered inside a callback.

use std::cell::Cell;

use crate::entry::Failure;
use crate::status::GantryStatus;

thread_local! {
    /// The innermost callback this thread is running, if any (callbacks
    /// nest: the abort callback may be polled inside a job system's `run`).
    static INSIDE: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Marks this thread as inside the callback `what` while it lives.
struct Mark {
    /// What was marked before this one (restored on drop).
    outer: Option<&'static str>,
}

impl Mark {
    fn enter(what: &'static str) -> Self {
        Self { outer: INSIDE.with(|inside| inside.replace(Some(what))) }
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        INSIDE.with(|inside| inside.set(self.outer));
    }
}

/// Runs the host's callback `call` (named `what` in messages: "the abort
/// callback") with this thread marked as inside it, so that calls it makes
/// into the API are refused rather than deadlocked.
pub(crate) fn in_callback<R>(what: &'static str, call: impl FnOnce() -> R) -> R {
    let _mark = Mark::enter(what);
    call()
}

/// `GANTRY_ERROR_REENTRANT` when this thread is running one of the host's
/// callbacks: no function that may lock is called from there.
pub(crate) fn refuse_inside_callback() -> Result<(), Failure> {
    match INSIDE.with(Cell::get) {
        Some(what) => Err(Failure::new(
            GantryStatus::GantryErrorReentrant,
            format!(
                "called from inside {what} on the thread running it, where Gantry may hold the locks this call \
                 needs; only gantry_last_error and gantry_status_name may be called there (do the work after \
                 the call that ran the callback returns, or on another thread)"
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_nest_and_unwind_per_thread() {
        assert!(refuse_inside_callback().is_ok());
        in_callback("the job system's run", || {
            in_callback("the abort callback", || {
                let e = refuse_inside_callback().unwrap_err();
                assert_eq!(e.status, GantryStatus::GantryErrorReentrant);
                assert!(e.message.contains("the abort callback"), "{}", e.message);
                // Another thread is not inside the callback.
                std::thread::scope(|s| s.spawn(|| assert!(refuse_inside_callback().is_ok())).join().unwrap());
            });
            let e = refuse_inside_callback().unwrap_err();
            assert!(e.message.contains("the job system's run"), "{}", e.message);
        });
        assert!(refuse_inside_callback().is_ok());
    }
}
