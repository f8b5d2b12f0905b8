//! Remote devices: the conformance suite through a loopback `rpc-server`,
//! and the kinds of their errors.

mod conformance;
mod errors;
