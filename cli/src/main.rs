//! The `gantry` command line: a thin dispatcher to one module per subcommand.
//! With no subcommand it runs the built-in default workload.

// No raw memory here: maps, SIMD and FFI live in the backends.
#![deny(unsafe_code)]

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Run one tensor compute graph across every device a machine has.
///
/// With no subcommand: the default workload, a llama-shaped model with
/// seeded random weights run over every device found and checked against a
/// CPU-only run.
#[derive(Parser)]
#[command(name = "gantry", version, about, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    demo: cli::demo::DemoArgs,
}

#[derive(Subcommand)]
enum Command {
    /// List the platforms and devices found, with their properties.
    Devices(cli::devices::DevicesArgs),
    /// Generate text with a GGUF model; prints prompt and decode speed.
    Run(cli::run::RunArgs),
    /// Talk to an instruct model: its chat template, turns kept in the KV cache.
    Chat(cli::chat::ChatArgs),
    /// Write every prompt position's logits to a file (little-endian f32).
    Logits(cli::logits::LogitsArgs),
    /// Sentence embeddings from a BERT folder and their cosine matrix.
    Embed(cli::embed::EmbedArgs),
    /// An OpenAI-compatible HTTP server: chat, completions, embeddings, continuous batching.
    Serve(cli::serve::ServeArgs),
    /// Prompt and decode speed, llama-bench's table (`--parallel` for several sequences).
    Bench(cli::bench::BenchArgs),
    /// Check (or time) every op of a backend against a reference.
    TestOps(cli::test_ops::TestOpsArgs),
    /// Serve this machine's devices to remote clients (QUIC, mutual TLS).
    #[cfg(feature = "remote")]
    RpcServer(cli::rpc_server::RpcServerArgs),
    /// Make an authority and server and client certificates for rpc-server.
    #[cfg(feature = "remote")]
    RpcCerts(cli::rpc_certs::RpcCertsArgs),
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => return cli::broken_pipe::parse_error_exit(&e),
    };
    cli::logging::init();
    cli::broken_pipe::end_quietly_on_broken_pipe();
    match args.command {
        Some(Command::Devices(a)) => cli::devices::run(&a),
        Some(Command::Run(a)) => cli::run::run(&a),
        Some(Command::Chat(a)) => cli::chat::run(&a),
        Some(Command::Logits(a)) => cli::logits::run(&a),
        Some(Command::Embed(a)) => cli::embed::run(&a),
        Some(Command::Serve(a)) => cli::serve::run(&a),
        Some(Command::Bench(a)) => cli::bench::run(&a),
        Some(Command::TestOps(a)) => cli::test_ops::run(&a),
        #[cfg(feature = "remote")]
        Some(Command::RpcServer(a)) => cli::rpc_server::run(&a),
        #[cfg(feature = "remote")]
        Some(Command::RpcCerts(a)) => cli::rpc_certs::run(&a),
        None => cli::demo::run(&args.demo),
    }
}
