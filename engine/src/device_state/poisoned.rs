//! The error of a lock whose holder panicked.

/// A lock whose holder panicked while holding it: what it guards may be
/// half-changed (a staging buffer left mapped, a batch half-recorded), so
/// the types here report it rather than carry on. The caller names the
/// device in the error it turns this into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poisoned;
