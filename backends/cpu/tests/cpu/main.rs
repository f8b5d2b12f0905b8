//! The CPU backend as the engine sees it: its device, buffers, extensions
//! and kernels under the scheduler, graph plans, fusion, the comparison of
//! backends node by node, the conformance suite, and reads that do not
//! block. One test binary (one link) for all of them.

mod backend;
mod compare_backends;
mod conformance;
mod experts;
mod fusion;
mod graph_plans;
mod seq;
mod tensor_read;
mod vision;
