//! The engine's error type.

use crate::DType;

/// Everything that can go wrong in the engine. Each variant's message names
/// the tensor, op, buffer or device involved.
#[derive(Debug, thiserror::Error)]
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
    /// A backend failed while computing or copying.
    #[error("backend {backend}: {reason}")]
    Backend {
        /// The backend's name.
        backend: String,
        /// What failed.
        reason: String,
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
