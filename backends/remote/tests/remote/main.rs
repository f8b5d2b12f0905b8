//! Remote devices: the conformance suite through a loopback `rpc-server`,
//! the kinds of their errors, and the server staying up against peers that
//! compute too long, stall handshakes or streams, or grab memory.

mod compute_deadline;
mod conformance;
mod errors;
mod handshake;
mod memory_cap;
mod streams;
