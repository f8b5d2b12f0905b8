//! The subcommands of the `gantry` command line.

pub mod test_ops;
