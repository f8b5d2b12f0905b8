//! The alignments host memory is handed out with, shared by every backend
//! that allocates or maps host memory (the CPU's buffers, a GPU backend's
//! pinned staging), so a tensor placed by one is where another expects it.

/// Alignment of host allocations: a cache line, and enough for any SIMD load.
pub const HOST_ALIGNMENT: usize = 64;

/// Alignment of tensors in buffers over caller memory: ggml's
/// `TENSOR_ALIGNMENT` and GGUF's default data alignment, so the tensors of a
/// mapped GGUF file can be placed where they lie.
pub const MAPPED_ALIGNMENT: usize = 32;
