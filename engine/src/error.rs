//! The engine's error type.

use crate::DType;

/// Everything that can go wrong in the engine. Each variant's message names
/// the tensor, op, buffer or device involved.
///
/// New variants may be added: a `match` outside this crate needs a `_` arm.
/// A backend's failure is [`Error::Backend`], whose [`BackendErrorKind`]
/// ([`Error::backend_kind`]) says what a host can do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A handle that was removed or never belonged to this table.
    #[error("stale or unknown {kind} handle {handle}")]
    StaleHandle {
        /// What the handle was for ("tensor", "buffer", ...).
        kind: &'static str,
        /// The handle, formatted.
        handle: String,
    },
    /// An op was given tensors it cannot take (shapes, dtypes, layout).
    #[error("{op}: {reason}")]
    InvalidOp {
        /// The op's name, as ggml spells it (`"MUL_MAT"`).
        op: &'static str,
        /// What is wrong, naming the tensors.
        reason: String,
    },
    /// A tensor description that cannot exist.
    #[error("invalid tensor {tensor}: {reason}")]
    InvalidTensor {
        /// The tensor's name or description.
        tensor: String,
        /// What is wrong.
        reason: String,
    },
    /// A dtype used where it is not supported.
    #[error("{what}: dtype {dtype} is not supported")]
    UnsupportedDType {
        /// Where it was used.
        what: String,
        /// The dtype.
        dtype: DType,
    },
    /// A size computation overflowed.
    #[error("size overflow: {0}")]
    Overflow(String),
    /// A read or write outside a tensor or buffer.
    #[error("out of bounds: {0}")]
    OutOfBounds(String),
    /// A tensor that needs memory has none.
    #[error("tensor {0} is not allocated")]
    NotAllocated(String),
    /// A buffer could not be allocated.
    #[error("out of memory: {buffer_type} could not allocate {size} bytes")]
    OutOfMemory {
        /// The buffer type's name.
        buffer_type: String,
        /// The requested size in bytes.
        size: usize,
    },
    /// A device, platform or backend was not found.
    #[error("not found: {0}")]
    NotFound(String),
    /// An operation the backend or device does not support.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A backend, its device or its driver failed: the driver or a library
    /// is missing, a kernel did not compile, the device ran out of memory or
    /// was lost, a remote device's connection failed, ... (`kind` says
    /// which). Made with [`Error::backend`] or [`Error::backend_with_source`].
    #[error("backend {backend}: {reason}")]
    #[non_exhaustive]
    Backend {
        /// The backend's (or device's) name.
        backend: String,
        /// What kind of failure it is: what a host can match on.
        kind: BackendErrorKind,
        /// What failed, in words (it already includes the message of
        /// `source`, when there is one).
        reason: String,
        /// The underlying error (a driver's, a library loader's, a
        /// connection's), when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The scheduler could not place or run a graph.
    #[error("scheduler: {0}")]
    Scheduler(String),
    /// The graph allocator could not plan or bind a graph.
    #[error("allocator: {0}")]
    Allocator(String),
    /// A device's memory budget would be exceeded: nothing was allocated.
    #[error(
        "memory budget of {device} exceeded: {needed} bytes needed (compute {compute} + held {held}), budget {budget}"
    )]
    BudgetExceeded {
        /// The device's name.
        device: String,
        /// Bytes the device would hold.
        needed: usize,
        /// Its budget in bytes.
        budget: usize,
        /// Of `needed`, the scheduler's compute memory.
        compute: usize,
        /// Of `needed`, everything else on the device (weights, caches).
        held: usize,
    },
    /// Computation was aborted by the user's callback.
    #[error("computation aborted")]
    Aborted,
}

/// What kind of failure an [`Error::Backend`] is, for a host to act on
/// (fall back to another device, free memory, reconnect) without reading
/// the message. New kinds may be added: a `match` needs a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendErrorKind {
    /// The device's driver is not installed or cannot be loaded (no
    /// `libcuda.so`, a stub or mismatched driver): the platform has no
    /// device on this machine.
    DriverMissing,
    /// A library the backend needs besides the driver cannot be found or
    /// loaded (NVRTC, cuBLAS).
    LibraryMissing,
    /// The driver is there but no usable device is: none present, all too
    /// old, busy in an exclusive mode, or one that refused to be opened.
    DeviceUnavailable,
    /// A kernel or shader did not compile, or its compiled image did not
    /// load on the device (a compiler error, an architecture the image was
    /// not made for).
    KernelCompile,
    /// The device ran out of memory while working (a buffer that could
    /// not be allocated in the first place is [`Error::OutOfMemory`]).
    OutOfDeviceMemory,
    /// The device was lost, reset or faulted (a driver crash, a removed
    /// GPU, an illegal address in a kernel): what was made on it is gone,
    /// open it again.
    DeviceLost,
    /// The device cannot do what was asked: a limit, feature or instruction
    /// set it lacks.
    Unsupported,
    /// The connection to a remote device failed: the address did not
    /// resolve, dialling or the TLS handshake failed, a call timed out or
    /// the connection was lost (objects made on it are gone).
    Transport,
    /// A remote server answered what this client does not speak or did not
    /// expect (another protocol version, a reply of the wrong kind, other
    /// devices than before).
    Protocol,
    /// Anything else: a driver call that failed for another reason, a
    /// backend used out of order, a bug.
    Other,
}

impl BackendErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 10] = [
        Self::DriverMissing,
        Self::LibraryMissing,
        Self::DeviceUnavailable,
        Self::KernelCompile,
        Self::OutOfDeviceMemory,
        Self::DeviceLost,
        Self::Unsupported,
        Self::Transport,
        Self::Protocol,
        Self::Other,
    ];

    /// The kind's name in snake case (`"driver_missing"`), for logs.
    pub const fn name(self) -> &'static str {
        match self {
            Self::DriverMissing => "driver_missing",
            Self::LibraryMissing => "library_missing",
            Self::DeviceUnavailable => "device_unavailable",
            Self::KernelCompile => "kernel_compile",
            Self::OutOfDeviceMemory => "out_of_device_memory",
            Self::DeviceLost => "device_lost",
            Self::Unsupported => "unsupported",
            Self::Transport => "transport",
            Self::Protocol => "protocol",
            Self::Other => "other",
        }
    }
}

impl std::fmt::Display for BackendErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Error {
    /// An [`Error::Backend`] of `backend` (its name), of `kind`, saying
    /// `reason`, with no underlying error.
    pub fn backend(backend: impl Into<String>, kind: BackendErrorKind, reason: impl Into<String>) -> Self {
        Self::Backend { backend: backend.into(), kind, reason: reason.into(), source: None }
    }

    /// An [`Error::Backend`] caused by `source` (a driver's, a loader's, a
    /// connection's error). `reason` should say what was being done and
    /// include `source`'s message: the error's own message is `reason`.
    pub fn backend_with_source(
        backend: impl Into<String>,
        kind: BackendErrorKind,
        reason: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Backend { backend: backend.into(), kind, reason: reason.into(), source: Some(Box::new(source)) }
    }

    /// What went wrong, without the error kind's prefix (`"unsupported:"`,
    /// `"backend remote:"`): for a message about something that is not a
    /// backend or an op (a certificate file).
    pub fn reason(&self) -> String {
        match self {
            Self::Backend { reason, .. } => reason.clone(),
            Self::Unsupported(message) => message.clone(),
            other => other.to_string(),
        }
    }

    /// The kind of a backend failure; `None` for every other error.
    pub fn backend_kind(&self) -> Option<BackendErrorKind> {
        match self {
            Self::Backend { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// This error, raised while `backend` was doing `context` (`"split
    /// 3"`), as a failure of that backend: an [`Error::Backend`] keeps its
    /// kind, an unsupported op or dtype is [`BackendErrorKind::Unsupported`],
    /// a failed allocation or exceeded budget
    /// [`BackendErrorKind::OutOfDeviceMemory`], anything else
    /// [`BackendErrorKind::Other`]; the original error is the source. An
    /// abort stays [`Error::Aborted`]: it is the caller's wish, not a failure.
    pub fn within_backend(self, backend: &str, context: impl std::fmt::Display) -> Self {
        let kind = match &self {
            Self::Aborted => return Self::Aborted,
            Self::Backend { kind, .. } => *kind,
            Self::Unsupported(_) | Self::UnsupportedDType { .. } => BackendErrorKind::Unsupported,
            Self::OutOfMemory { .. } | Self::BudgetExceeded { .. } => BackendErrorKind::OutOfDeviceMemory,
            _ => BackendErrorKind::Other,
        };
        let reason = format!("{context}: {self}");
        Self::backend_with_source(backend, kind, reason, self)
    }
}

/// Result with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error::InvalidOp`] from a format string.
#[macro_export]
#[doc(hidden)]
macro_rules! op_err {
    ($op:expr, $($arg:tt)*) => {
        $crate::Error::InvalidOp { op: $op, reason: format!($($arg)*) }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_errors_carry_their_kind_and_source() {
        for kind in BackendErrorKind::ALL {
            let e = Error::backend("gpu0", kind, "it failed");
            assert_eq!(e.backend_kind(), Some(kind));
            assert_eq!(e.to_string(), "backend gpu0: it failed");
            assert!(std::error::Error::source(&e).is_none());
        }
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let e = Error::backend_with_source("remote a:1", BackendErrorKind::Transport, "call: reset by peer", io);
        assert_eq!(e.backend_kind(), Some(BackendErrorKind::Transport));
        let source = std::error::Error::source(&e).expect("a source");
        assert_eq!(
            source.downcast_ref::<std::io::Error>().map(std::io::Error::kind),
            Some(std::io::ErrorKind::ConnectionReset)
        );
        assert_eq!(Error::NotFound("cuda0".into()).backend_kind(), None);
    }

    #[test]
    fn kinds_have_distinct_names() {
        let names: std::collections::HashSet<&str> = BackendErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), BackendErrorKind::ALL.len());
    }

    #[test]
    fn an_error_within_a_backend_keeps_what_it_was() {
        let lost = Error::backend("cuda0", BackendErrorKind::DeviceLost, "cuLaunchKernel: ILLEGAL_ADDRESS");
        let wrapped = lost.within_backend("cuda0", "split 2");
        assert_eq!(wrapped.backend_kind(), Some(BackendErrorKind::DeviceLost));
        assert!(wrapped.to_string().starts_with("backend cuda0: split 2: backend cuda0: cuLaunchKernel"), "{wrapped}");
        let inner = std::error::Error::source(&wrapped).and_then(|s| s.downcast_ref::<Error>());
        assert_eq!(inner.and_then(Error::backend_kind), Some(BackendErrorKind::DeviceLost));
        assert!(matches!(Error::Aborted.within_backend("CPU", "split 0"), Error::Aborted));
        let unsupported = Error::Unsupported("no such op".into()).within_backend("CPU", "split 0");
        assert_eq!(unsupported.backend_kind(), Some(BackendErrorKind::Unsupported));
        let oom = Error::OutOfMemory { buffer_type: "CPU".into(), size: 1 }.within_backend("CPU", "split 0");
        assert_eq!(oom.backend_kind(), Some(BackendErrorKind::OutOfDeviceMemory));
        let other = Error::OutOfBounds("row 9".into()).within_backend("CPU", "split 0");
        assert_eq!(other.backend_kind(), Some(BackendErrorKind::Other));
    }
}
