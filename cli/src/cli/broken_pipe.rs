//! Commands that print to standard output end quietly when its reader goes
//! away (`gantry devices | head -1`), as Unix tools do, instead of
//! reporting a panic from `println!` ("failed printing to stdout: Broken
//! pipe").
//!
//! Rust ignores `SIGPIPE`, so a write to a closed pipe is an error, which
//! `println!` raises as a panic. Every command installs a panic hook that
//! ends the process with status 141 (128 + SIGPIPE, what a shell shows for
//! a tool ended by the signal) for that panic alone, ends one that failed
//! otherwise (a full disk, `> /dev/full`) with status 1 and the error, ends
//! one on standard error with status 1 (nothing left to say why), and
//! hands every other panic to the default hook. (The servers print nothing
//! to standard output; their clients' sockets do not go through it.) A
//! closed standard output (`>&-`) cannot be told from `> /dev/null`: Rust
//! reopens a closed standard descriptor on `/dev/null` before `main`.

use std::io::Write;

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
        if message.starts_with("failed printing to stderr") {
            // Nowhere left to say why: status 1, quietly.
            std::process::exit(1);
        }
        if message.starts_with("failed printing to stdout") {
            if message.contains("Broken pipe") {
                std::process::exit(BROKEN_PIPE_STATUS);
            }
            // Any other failure (a full disk, `> /dev/full`) is an error
            // with status 1, reported without a panic's backtrace.
            let _ = writeln!(std::io::stderr(), "gantry: writing to standard output: {}", printing_error(message));
            std::process::exit(1);
        }
        default(info);
    }));
}

/// The I/O error of `println!`'s panic message.
fn printing_error(message: &str) -> &str {
    message.strip_prefix("failed printing to stdout: ").unwrap_or(message)
}

/// A writer that keeps the first error of its writes, for printing code
/// that ignores them (`let _ = writeln!(…)` in a report), so that the
/// command can still fail when its output was lost.
pub struct CheckedWriter<W> {
    inner: W,
    /// The first error a write or flush returned.
    pub error: Option<std::io::Error>,
}

impl<W: Write> CheckedWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self { inner, error: None }
    }

    /// Flushes, and `Err` with the first error seen (see [`to_stdout`]).
    pub fn finish(mut self) -> Result<(), gantry::Error> {
        let flushed = self.inner.flush();
        match self.error.take() {
            Some(e) => to_stdout(Err(e)),
            None => to_stdout(flushed),
        }
    }
}

impl<W: Write> Write for CheckedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| {
            self.error.get_or_insert_with(|| std::io::Error::new(e.kind(), e.to_string()));
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().inspect_err(|e| {
            self.error.get_or_insert_with(|| std::io::Error::new(e.kind(), e.to_string()));
        })
    }
}

/// A write of the reply to standard output, checked: `run` and `chat` write
/// their reply piece by piece and must not lose it silently (`> /dev/full`
/// exited 0 with nothing written). Every failure is an error naming
/// standard output; [`exit_status`] turns one whose reader went away into
/// the quiet status 141.
pub fn to_stdout(result: std::io::Result<()>) -> Result<(), gantry::Error> {
    result.map_err(|source| gantry::Error::Io { context: "writing the reply to standard output".into(), source })
}

/// The exit status of a printing command that failed with `error`, and
/// whether the error is worth a message: a standard output whose reader
/// went away (`gantry run … | head -c 10`) ends quietly with 141, as the
/// hook ends `println!`'s panic; everything else is status 1, reported.
pub fn exit_status(error: &gantry::Error) -> (std::process::ExitCode, bool) {
    match error {
        gantry::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe => {
            (std::process::ExitCode::from(BROKEN_PIPE_STATUS as u8), false)
        }
        _ => (std::process::ExitCode::FAILURE, true),
    }
}

/// What clap's own printing ends with: `--help` and `--version` on
/// standard output, usage errors on standard error (status 2), as
/// `Parser::parse` does, except that help that cannot be written (a full
/// disk) is status 1 with the error rather than a silent 0.
pub fn parse_error_exit(error: &clap::Error) -> std::process::ExitCode {
    match error.print() {
        Ok(()) => std::process::ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2)),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::ExitCode::from(BROKEN_PIPE_STATUS as u8),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "gantry: writing to standard output: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
