//! The `gantry` command as a user runs it: `bench`, `chat`, the
//! instruction-set cap, crafted inputs (sizes past the limits, a looping
//! chat template, `--no-mmap`), and remote devices through `rpc-server`. One test
//! binary (one link) for all of them.

mod bench_cli;
mod chat_cli;
mod cpu_isa_cap;
mod crafted_inputs;
mod remote_loopback;
mod serve_cli;
