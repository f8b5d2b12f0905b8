//! Errors a device reports from any thread, collected until the next check.

use crate::sync::Mutex;

use super::Poisoned;

/// Errors pushed from any thread (a device's error callback) and taken by
/// whichever thread checks next. A take empties the log in the same
/// critical section that reads it, so each error pushed is taken by exactly
/// one take: none is lost to a push landing between a read and a clear, and
/// none is reported by two checks that ran at once.
#[derive(Debug, Default)]
pub struct ErrorLog(Mutex<Vec<String>>);

impl ErrorLog {
    /// Logs `error`. A poisoned log drops it: every later
    /// [`take`](ErrorLog::take) reports the poisoning instead.
    pub fn push(&self, error: String) {
        if let Ok(mut log) = self.0.lock() {
            log.push(error);
        }
    }

    /// Every error pushed since the last take, oldest first, leaving the log
    /// empty.
    pub fn take(&self) -> Result<Vec<String>, Poisoned> {
        let mut log = self.0.lock().map_err(|_| Poisoned)?;
        Ok(std::mem::take(&mut *log))
    }
}
