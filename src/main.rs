//! The `gantry` command line: a thin dispatcher to one module per subcommand.

mod cli;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// Run one tensor compute graph across every device a machine has.
#[derive(Parser)]
#[command(name = "gantry", version, about)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Check (or time) every op of a backend against a reference.
    TestOps(cli::test_ops::TestOpsArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Some(Command::TestOps(a)) => cli::test_ops::run(&a),
        None => {
            let _ = Args::command().print_help();
            ExitCode::SUCCESS
        }
    }
}
