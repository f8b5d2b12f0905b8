//! Fixtures for tests of remote devices (feature `testing`): loopback
//! `rpc-server`s over the CPU with certificates made at test time, and
//! (feature `arbitrary`) the server's fuzz case. Kept in this crate so the
//! other backends' test fixtures (`gantry-testing`) do not depend on it.

#[cfg(feature = "arbitrary")]
pub mod index_seeds;
pub mod loopback;
#[cfg(feature = "arbitrary")]
pub mod remote_fuzz;
