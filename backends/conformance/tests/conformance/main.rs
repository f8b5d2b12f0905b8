//! The conformance suite itself: it detects a backend that computes wrong.

mod detects;
