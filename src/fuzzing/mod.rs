//! The model layer's fuzz harnesses, behind the `fuzzing` feature: what the
//! `model_loader`, `bert_folder` and `chat_template` targets of `fuzz/` run,
//! kept here so that the inputs they once failed on are replayed by the
//! normal test suite (`tests/models/fuzz_regressions.rs`) without
//! cargo-fuzz.
//!
//! Each harness takes the fuzzer's bytes, builds a valid-looking structure
//! from them with `arbitrary` (a model file, a BERT folder, a template and a
//! conversation), lets the bytes mutate it, and feeds it through Gantry's
//! real entry points. The bytes are read so that running out of them picks
//! the unmutated choice: an empty input is a valid model (or folder, or
//! template) that loads and runs, and each seed is a few bytes.
//!
//! What must hold: an [`Outcome`] or an error that says what broke (a
//! logits vector of the wrong length, an output beyond its bound); a panic,
//! an abort, a hang or unbounded memory anywhere is a finding too
//! (libFuzzer reports them).

pub mod bert_folder;
pub mod chat_template;
mod host;
pub mod model_loader;

/// How far one input got; anything but a broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Refused with an error (the message), before or while loading.
    Refused(String),
    /// Loaded (or compiled), then refused while running (the message).
    FailedToRun(String),
    /// Loaded and ran: a forward, an embedding, a rendering.
    Ran,
}
