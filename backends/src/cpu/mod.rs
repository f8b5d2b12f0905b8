//! The CPU backend.

pub mod quant;
