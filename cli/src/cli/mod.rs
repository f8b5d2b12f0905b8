//! One module per subcommand of the `gantry` CLI.

pub mod bench;
pub mod broken_pipe;
pub mod budget;
pub mod chat;
pub mod common;
pub mod demo;
pub mod devices;
pub mod embed;
pub mod f32_file;
pub mod logging;
pub mod logits;
pub mod memory_floor;
pub mod profile_report;
#[cfg(feature = "remote")]
pub mod rpc_certs;
#[cfg(feature = "remote")]
pub mod rpc_server;
pub mod run;
pub mod serve;
pub mod test_ops;
