//! Shared helpers of the allocator's integration tests.
#![allow(dead_code)]

pub mod interpreter;
pub mod liveness;
