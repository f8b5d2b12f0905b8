//! The scheduler's fuzz case (feature `arbitrary`): random programs over a
//! few tensors, random test GPUs (which ops each supports, whose memory it
//! uses), weights and destinations on random backends, random pins,
//! pipeline copies and split input limits, driven over a few runs.
//!
//! [`run_case`] checks, against a CPU-only reference computed with every
//! tensor in memory of its own:
//! - a configuration that cannot run (a pin onto a backend that cannot run
//!   the node or use its memory; a pre-allocated tensor no backend able to
//!   use its memory can run) is refused with an error, and every other is
//!   scheduled;
//! - every node runs on a backend that supports it, over memory that
//!   backend can use (checked on every compute by [`CheckedBackend`]), in
//!   splits that cover the graph in order, and pinned nodes where pinned;
//! - every node is computed exactly once per run;
//! - nothing is read before it is written: compute memory is filled with
//!   NaN before every run, and every output, every destination and every
//!   node handed to the eval callback must equal the reference bit for bit
//!   (the test GPUs run the CPU kernels, on one thread like the reference);
//! - the user's graph reads its own sources between calls, and reset
//!   removes every tensor the scheduler made.
//!
//! The fuzz target (`fuzz/fuzz_targets/sched.rs`) and the replay test of
//! its regressions (`tests/sched_fuzz_regressions.rs`) both call [`run_case`].

mod case;
mod checked_backend;
mod devices;
mod program;
mod run;

pub use case::{
    DST_ROWS, DstSpec, GpuMemory, GpuSpec, Instr, MAX_GPUS, N_OP_CLASSES, OpClass, RunSpec, SchedCase, WeightShape,
    WeightSpec,
};
pub use checked_backend::{CheckedBackend, Journal, SharedJournal};
pub use devices::{CaseDevices, op_class};
pub use program::{Program, build_program};
pub use run::{Outcome, Violation, run_case};

/// Decodes a case from fuzzer bytes the way `fuzz_target!` does for a typed input.
pub fn decode_case(bytes: &[u8]) -> arbitrary::Result<SchedCase> {
    use arbitrary::Arbitrary as _;
    SchedCase::arbitrary_take_rest(arbitrary::Unstructured::new(bytes))
}
