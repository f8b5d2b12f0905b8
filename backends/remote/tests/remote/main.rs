//! Remote devices: the conformance suite through a loopback `rpc-server`.

mod conformance;
