//! Gantry's backends.

pub mod cpu;
