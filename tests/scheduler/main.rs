//! The scheduler across backends: its scenarios, and the replayed fuzz
//! cases of the scheduler and the remote server. One test binary.

mod expert_copies;
mod remote_fuzz_regressions;
mod sched_fuzz_regressions;
mod sched_scenarios;
