//! Errors of a parallel loop's workers, kept until the loop has joined: the
//! first one noted and how many there were. Built from
//! [`gantry_engine::sync`], so `tests/loom_cpu_kernels.rs` checks it in every
//! interleaving of racing workers.

use gantry_engine::Error;
use gantry_engine::sync::{Mutex, lock};

/// What the workers noted so far.
#[derive(Debug, Default)]
struct Failures {
    count: usize,
    first: Option<Error>,
}

/// Collects the failures of a parallel loop's items (the kernels cannot fail
/// once sizes are checked, but an error must never be dropped). A success
/// costs nothing; a failure takes a lock, so the count and the first error
/// always change together.
#[derive(Debug, Default)]
pub struct FirstError(Mutex<Failures>);

impl FirstError {
    /// Notes the outcome of one item: an error is kept if it is the first,
    /// and counted either way.
    #[inline]
    pub fn note<T>(&self, result: Result<T, Error>) {
        if let Err(e) = result {
            self.note_error(e);
        }
    }

    #[cold]
    fn note_error(&self, e: Error) {
        let mut failures = lock(&self.0);
        failures.count += 1;
        failures.first.get_or_insert(e);
    }

    /// How many items failed and the first error noted, or `None` when none
    /// failed; takes the error out. Call it once the workers have joined.
    pub fn take(&self) -> Option<(usize, Error)> {
        let mut failures = lock(&self.0);
        let first = failures.first.take()?;
        Some((std::mem::take(&mut failures.count), first))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_error_and_counts_all() {
        let failed = FirstError::default();
        failed.note(Ok::<_, Error>(1));
        assert!(failed.take().is_none(), "a success is no failure");
        failed.note::<()>(Err(Error::Unsupported("first".into())));
        failed.note(Ok::<_, Error>(2));
        failed.note::<()>(Err(Error::Unsupported("second".into())));
        let (n, first) = failed.take().expect("two failures");
        assert_eq!(n, 2);
        assert!(matches!(&first, Error::Unsupported(s) if s == "first"), "{first:?}");
        assert!(failed.take().is_none(), "taken");
    }
}
