//! Gantry's backends.
