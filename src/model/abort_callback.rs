//! One abort callback for a model's whole compute: the scheduler's poll
//! between splits and, where a backend's device offers it, the backend's
//! own poll between nodes. The decoder's session and the BERT encoder
//! install theirs through here.

use gantry_engine::sched::Scheduler;
use gantry_engine::{AbortCallback, SetAbortCallback, device_extension};

/// Installs `callback` (or removes it, with `None`) on `sched` and on each of
/// its backends whose device offers the [`SetAbortCallback`] extension (this
/// replaces those backends' own callbacks while set). A backend whose
/// extension refuses it (a wrapper around a CPU backend, whose device is the
/// CPU's) keeps its own callback and a warning is logged: the scheduler's
/// poll still stops the compute before its next split.
pub(crate) fn install(sched: &mut Scheduler, callback: Option<AbortCallback>) {
    for b in sched.backends() {
        let Some(set) = device_extension::<SetAbortCallback>(b.device()) else { continue };
        if let Err(e) = (set.0)(b.as_ref(), callback.clone()) {
            tracing::warn!(backend = b.name(), error = %e, "the abort callback polls this backend only between splits");
        }
    }
    sched.set_abort_callback(callback);
}
