//! The `gantry` crate's error type: the engine's errors plus the model layer's.

/// Everything that can go wrong through the `gantry` facade.
///
/// New variants may be added: a `match` outside this crate needs a `_` arm.
/// A backend's failure is an engine error whose kind
/// [`Error::backend_kind`] gives.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An engine error (shapes, buffers, backends, the scheduler).
    #[error(transparent)]
    Engine(#[from] gantry_engine::Error),
    /// A model that cannot be built or run as asked (hyperparameters,
    /// missing or mis-shaped weights, context overflow).
    #[error("model: {0}")]
    Model(String),
    /// A model file (GGUF, safetensors) or its metadata that cannot be used:
    /// malformed, truncated, or describing something impossible.
    #[error("invalid model file {file}: {reason}")]
    InvalidModel {
        /// The file (its path, or a description of in-memory bytes).
        file: String,
        /// What is wrong, naming the key, tensor or byte offset.
        reason: String,
    },
    /// A reference model could not be fetched (no `python3`, no network, a
    /// bad download, a file missing from its package).
    #[error("fetch: {0}")]
    Fetch(String),
    /// An I/O error, naming the file or action.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The message without the `model: ` that names the error's kind, for
    /// a caller that names the context itself (`--json-schema FILE: …`).
    pub fn detail(&self) -> String {
        match self {
            Error::Model(message) => message.clone(),
            other => other.to_string(),
        }
    }

    /// The kind of a backend's failure (a missing driver, a kernel that did
    /// not compile, a lost device, a failed connection, ...; see
    /// [`gantry_engine::BackendErrorKind`]); `None` for every other error.
    pub fn backend_kind(&self) -> Option<gantry_engine::BackendErrorKind> {
        match self {
            Error::Engine(e) => e.backend_kind(),
            _ => None,
        }
    }
}

/// Result with the facade's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
