//! Commands that print to standard output end quietly when its reader goes
//! away (`gantry devices | head -1`), as Unix tools do, instead of
//! reporting a panic from `println!` ("failed printing to stdout: Broken
//! pipe").
//!
//! Rust ignores `SIGPIPE`, so a write to a closed pipe is an error, which
//! `println!` raises as a panic. The printing commands install a panic hook
//! that ends the process with status 141 (128 + SIGPIPE, what a shell shows
//! for a tool ended by the signal) for that panic alone, and hands every
//! other panic to the default hook. The servers (`serve`, `rpc-server`)
//! print little and keep the default: a client that hangs up is an error on
//! its connection there.

/// The exit status of a process whose standard output went away.
const BROKEN_PIPE_STATUS: i32 = 141;

/// Installs the hook (see the module's documentation).
pub fn end_quietly_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_STATUS);
        }
        default(info);
    }));
}
