//! The CPU backend's shared state under loom (`RUSTFLAGS="--cfg loom"`):
//! the compute state and abort slot, the kernels' task counters, home
//! ranges and first error, and the spin pool. Empty without `--cfg loom`.

mod compute;
mod kernels;
mod spin_pool;
