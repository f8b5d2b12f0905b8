//! Fixtures for tests and benches across the workspace, behind the
//! `testing` feature (and always in the engine's own unit tests); not part
//! of the production API.
//!
//! - [`TestBufferType`]: the one test buffer type — host memory, device-like
//!   memory, or virtual memory (a size, no bytes), any alignment, maximum
//!   size, read-only or not;
//! - [`mock_devices`]: devices and backends that place but do not compute,
//!   for the scheduler's placement systems;
//! - [`CountingAllocator`]: a global allocator counting heap allocations, for
//!   the zero-allocation tests;
//! - [`interpreter`]: a small F32 interpreter computing a graph through its
//!   placements, and [`liveness`]: an independent check that no two live
//!   tensors share bytes — the allocator's oracles;
//! - [`test_signal`]: values with flat, zero and spiky blocks, for
//!   quantizers and kernels; [`lookup_rows`]: random rows of the read-only
//!   lookup types; [`reference_dir`]: where the independent references live.

mod counting_alloc;
pub mod interpreter;
pub mod liveness;
mod lookup_rows;
pub mod mock_devices;
mod test_buffer;

pub use counting_alloc::CountingAllocator;
pub use lookup_rows::lookup_rows;
pub use test_buffer::TestBufferType;

/// A deterministic test signal for quantizers and kernels: `n` values in
/// `[-scale, scale)` with a run of zeros and one outlier (20x) every 97
/// values, so blocks of every kind (flat, all-zero, spiky) occur.
pub fn test_signal(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut rng = crate::SplitMix64::new(seed);
    (0..n)
        .map(|i| {
            let v = scale * rng.uniform();
            match i % 97 {
                40..=47 => 0.0,
                90 => v * 20.0,
                _ => v,
            }
        })
        .collect()
}

/// The repository's root, where the tests' files are (`tests/data`,
/// `fuzz/regressions`, `fuzz/seeds`): `GANTRY_REPO_ROOT` when it is set
/// (a test binary run away from the checkout it was built in, as
/// `scripts/gpu_check.sh` runs the prebuilt ones on a lent GPU machine),
/// else the checkout it was built in (its path is compiled in).
pub fn repo_root() -> std::path::PathBuf {
    match std::env::var_os("GANTRY_REPO_ROOT") {
        Some(root) if !root.is_empty() => std::path::PathBuf::from(root),
        // This file is compiled in the engine crate, one folder below the root.
        _ => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    }
}

/// The repository's reference data, `tests/data/` under [`repo_root`]: what
/// independent engines (ggml's quantizers, llama.cpp, float64 numpy
/// forwards) computed, each file with where it came from in its README.
/// Part of every clone.
pub fn reference_dir() -> std::path::PathBuf {
    repo_root().join("tests").join("data")
}
