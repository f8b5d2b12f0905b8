//! The one way into the library from C: every exported function runs its
//! body through [`entry`], which catches panics, turns errors into a status
//! code and records the message for `gantry_last_error`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use gantry::engine::BackendErrorKind;

use crate::reentry::refuse_inside_callback;
use crate::status::{GantryStatus, clear_last_error, set_last_error};

/// Why a call failed: the status to return and the message to keep.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: GantryStatus,
    pub(crate) message: String,
}

impl Failure {
    /// A failure with `status` and `message`.
    pub(crate) fn new(status: GantryStatus, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    /// A null pointer or value out of range.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(GantryStatus::GantryErrorInvalidArgument, message)
    }
}

impl From<gantry::engine::Error> for Failure {
    fn from(e: gantry::engine::Error) -> Self {
        use gantry::engine::Error as E;
        let status = match &e {
            E::StaleHandle { .. } => GantryStatus::GantryErrorInvalidHandle,
            E::InvalidOp { .. } | E::InvalidTensor { .. } | E::Overflow(_) | E::OutOfBounds(_) => {
                GantryStatus::GantryErrorInvalidArgument
            }
            E::UnsupportedDType { .. } | E::Unsupported(_) => GantryStatus::GantryErrorUnsupported,
            E::NotAllocated(_) | E::Scheduler(_) | E::Allocator(_) => GantryStatus::GantryErrorState,
            E::OutOfMemory { .. } | E::BudgetExceeded { .. } => GantryStatus::GantryErrorOutOfMemory,
            E::NotFound(_) => GantryStatus::GantryErrorNotFound,
            E::Backend { kind, .. } => backend_status(*kind),
            E::Aborted => GantryStatus::GantryErrorAborted,
            // A variant this crate does not know yet: a failure of the engine's state.
            _ => GantryStatus::GantryErrorState,
        };
        Self::new(status, e.to_string())
    }
}

/// The status of a backend failure of `kind`: one code per kind, so a host
/// tells a missing driver from a kernel that did not compile without
/// reading the message (which `gantry_last_error` still gives).
pub(crate) fn backend_status(kind: BackendErrorKind) -> GantryStatus {
    match kind {
        BackendErrorKind::DriverMissing => GantryStatus::GantryErrorDriverMissing,
        BackendErrorKind::LibraryMissing => GantryStatus::GantryErrorLibraryMissing,
        BackendErrorKind::DeviceUnavailable => GantryStatus::GantryErrorDeviceUnavailable,
        BackendErrorKind::KernelCompile => GantryStatus::GantryErrorKernelCompile,
        BackendErrorKind::OutOfDeviceMemory => GantryStatus::GantryErrorDeviceOom,
        BackendErrorKind::DeviceLost => GantryStatus::GantryErrorDeviceLost,
        BackendErrorKind::Unsupported => GantryStatus::GantryErrorUnsupported,
        BackendErrorKind::Transport => GantryStatus::GantryErrorTransport,
        BackendErrorKind::Protocol => GantryStatus::GantryErrorProtocol,
        // `Other`, and kinds added later: a backend failure.
        _ => GantryStatus::GantryErrorBackend,
    }
}

impl From<gantry::Error> for Failure {
    fn from(e: gantry::Error) -> Self {
        match e {
            gantry::Error::Engine(e) => e.into(),
            other => Self::new(GantryStatus::GantryErrorModel, other.to_string()),
        }
    }
}

/// The result of a call body.
pub(crate) type CallResult = Result<(), Failure>;

/// Runs `body` for the exported function `name`: `GANTRY_OK` when it
/// succeeds (clearing the last error), its status when it fails, and
/// `GANTRY_ERROR_PANIC` when it panics — the panic stops here. Called from
/// inside one of the host's callbacks it runs nothing and answers
/// `GANTRY_ERROR_REENTRANT` (the body could wait for a lock its own thread
/// holds; see the `reentry` module).
pub(crate) fn entry(name: &'static str, body: impl FnOnce() -> CallResult) -> GantryStatus {
    let guarded = || refuse_inside_callback().and_then(|()| body());
    match catch_unwind(AssertUnwindSafe(guarded)) {
        Ok(Ok(())) => {
            clear_last_error();
            GantryStatus::GantryOk
        }
        Ok(Err(failure)) => {
            set_last_error(&format!("{name}: {}", failure.message));
            failure.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            set_last_error(&format!("{name}: internal error (panic caught at the C boundary): {what}"));
            GantryStatus::GantryErrorPanic
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::ffi::CStr;

    use gantry::engine::{BackendErrorKind, Error};

    use super::*;
    use crate::status::{gantry_last_error, gantry_status_name};

    fn last_error() -> String {
        // SAFETY: gantry_last_error never returns null and the text lives
        // until the next call on this thread.
        unsafe { CStr::from_ptr(gantry_last_error()) }.to_string_lossy().into_owned()
    }

    fn name_of(status: GantryStatus) -> String {
        // SAFETY: gantry_status_name returns a static NUL-terminated string.
        unsafe { CStr::from_ptr(gantry_status_name(status as i32)) }.to_string_lossy().into_owned()
    }

    #[test]
    fn every_backend_error_kind_has_its_own_status_and_keeps_its_message() {
        let mut seen = HashSet::new();
        for kind in BackendErrorKind::ALL {
            let reason = format!("failed as {kind}");
            let status = entry("gantry_test", || Err(Error::backend("cuda0", kind, reason.clone()).into()));
            assert_eq!(status, backend_status(kind));
            assert!(seen.insert(status as i32), "{kind:?} shares {} with another kind", name_of(status));
            assert_eq!(last_error(), format!("gantry_test: backend cuda0: {reason}"));
        }
        let expected = [
            (BackendErrorKind::DriverMissing, "GANTRY_ERROR_DRIVER_MISSING"),
            (BackendErrorKind::LibraryMissing, "GANTRY_ERROR_LIBRARY_MISSING"),
            (BackendErrorKind::DeviceUnavailable, "GANTRY_ERROR_DEVICE_UNAVAILABLE"),
            (BackendErrorKind::KernelCompile, "GANTRY_ERROR_KERNEL_COMPILE"),
            (BackendErrorKind::OutOfDeviceMemory, "GANTRY_ERROR_DEVICE_OOM"),
            (BackendErrorKind::DeviceLost, "GANTRY_ERROR_DEVICE_LOST"),
            (BackendErrorKind::Unsupported, "GANTRY_ERROR_UNSUPPORTED"),
            (BackendErrorKind::Transport, "GANTRY_ERROR_TRANSPORT"),
            (BackendErrorKind::Protocol, "GANTRY_ERROR_PROTOCOL"),
            (BackendErrorKind::Other, "GANTRY_ERROR_BACKEND"),
        ];
        assert_eq!(expected.len(), BackendErrorKind::ALL.len());
        for (kind, name) in expected {
            assert_eq!(name_of(backend_status(kind)), name, "{kind:?}");
        }
    }

    #[test]
    fn a_backend_error_through_the_facade_keeps_its_kind() {
        let e = gantry::Error::Engine(Error::backend("remote a:1", BackendErrorKind::Transport, "lost"));
        assert_eq!(Failure::from(e).status, GantryStatus::GantryErrorTransport);
        let wrapped =
            Error::backend("cuda0", BackendErrorKind::DeviceLost, "illegal address").within_backend("cuda0", "split 1");
        assert_eq!(Failure::from(wrapped).status, GantryStatus::GantryErrorDeviceLost);
        // Not a backend error: the codes it had before.
        assert_eq!(Failure::from(Error::Aborted).status, GantryStatus::GantryErrorAborted);
        assert_eq!(Failure::from(Error::NotFound("cuda0".into())).status, GantryStatus::GantryErrorNotFound);
    }

    #[test]
    fn statuses_have_distinct_values_and_names() {
        let values: HashSet<i32> = GantryStatus::ALL.iter().map(|s| *s as i32).collect();
        assert_eq!(values.len(), GantryStatus::ALL.len());
        let names: HashSet<String> = GantryStatus::ALL.iter().map(|s| name_of(*s)).collect();
        assert_eq!(names.len(), GantryStatus::ALL.len());
        assert!(!names.contains("GANTRY_STATUS_UNKNOWN"));
        for (i, s) in GantryStatus::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i, "the codes are 0, 1, 2, ... in order");
        }
        // SAFETY: as in name_of.
        let unknown = unsafe { CStr::from_ptr(gantry_status_name(GantryStatus::ALL.len() as i32)) };
        assert_eq!(unknown.to_str(), Ok("GANTRY_STATUS_UNKNOWN"));
    }
}
