//! The one way into the library from C: every exported function runs its
//! body through [`entry`], which catches panics, turns errors into a status
//! code and records the message for `gantry_last_error`.

use std::panic::{AssertUnwindSafe, catch_unwind};

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
            E::Backend { .. } => GantryStatus::GantryErrorBackend,
            E::Aborted => GantryStatus::GantryErrorAborted,
        };
        Self::new(status, e.to_string())
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
/// `GANTRY_ERROR_PANIC` when it panics — the panic stops here.
pub(crate) fn entry(name: &'static str, body: impl FnOnce() -> CallResult) -> GantryStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
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
