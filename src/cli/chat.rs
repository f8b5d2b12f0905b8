//! `gantry chat` (placeholder while it is written).

use std::process::ExitCode;

use clap::Args;

/// Options of `gantry chat`.
#[derive(Args, Debug)]
pub struct ChatArgs {}

/// Runs the chat.
pub fn run(_: &ChatArgs) -> ExitCode {
    ExitCode::FAILURE
}
