//! Cases ggml's CPU backend cannot compute, and why: layouts or types its
//! builders reject (a GGML_ASSERT in ggml.c) and its kernels do not take.

use crate::Case;

/// Why ggml cannot compute `case`, if it cannot.
pub fn ggml_lacks(case: &Case) -> Option<&'static str> {
    let _ = case;
    None
}
