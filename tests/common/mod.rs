//! Shared helpers of the integration tests.
#![allow(dead_code)]

/// The test GPU platform lives in the backends crate.
#[allow(unused_imports)]
pub use gantry::backends::testing as test_gpu;

use gantry::{Context, TensorId};

/// Fills `t` (F32/F16/BF16) with seeded values in `[-scale, scale)`.
pub fn fill(ctx: &mut Context, t: TensorId, seed: u64, scale: f32) {
    let n = ctx.desc(t).unwrap().nelements();
    let mut rng = gantry::model::llama::SplitMix64(seed);
    let values: Vec<f32> = (0..n).map(|_| scale * rng.uniform()).collect();
    ctx.set_f32(t, &values).unwrap();
}

/// Largest absolute difference between two equal-length slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// The shared reference folder (`../shared/reference` beside the repository,
/// as in CI), or `None` when absent.
pub fn reference_dir() -> Option<std::path::PathBuf> {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    [here.join("../shared/reference"), std::path::PathBuf::from("/work/shared/reference")]
        .into_iter()
        .find(|p| p.join("README.md").exists())
}
