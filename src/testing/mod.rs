//! Fixtures for the facade's tests and benches, behind the `testing`
//! feature; not part of the production API. The engine's and the backends'
//! fixtures are re-exported: [`engine`] (test buffer type, mock devices,
//! counting allocator, the allocator's oracles) and [`backends`] (the test
//! GPU platform).
//!
//! - [`PlannedLlama`]: a llama model (the real graph builder of
//!   [`crate::model::llama`]) whose weights and KV cache sit in memory of a
//!   given buffer type — virtual memory, to plan, allocate and schedule
//!   SmolLM2-sized graphs without their bytes;
//! - [`fill`], [`max_abs_diff`], [`reference_dir`], [`repo_root`]
//!   (`GANTRY_REPO_ROOT`), [`TINY_LLAMA`]: what the integration tests share;
//! - [`smollm2`]: llama.cpp's reference results for SmolLM2 and their
//!   tolerances, for every test running the model;
//! - [`seeded_model`]: seeded random-weight GGUF files of each decoder
//!   family, whose llama.cpp logits are stored in `tests/data/families/`.

mod lookup_blocks;
mod planned_llama;
pub mod seeded_model;
pub mod smollm2;

pub use gantry_backends::testing as backends;
pub use gantry_engine::testing as engine;
pub use gantry_engine::testing::{reference_dir, repo_root};
pub use planned_llama::PlannedLlama;

use gantry_engine::{Context, SplitMix64, TensorId};

use crate::model::decoder::DecoderHparams;

/// A llama small enough to run in a test in milliseconds (width 64, two
/// layers, grouped-query attention, a vocabulary of 300), with random weights
/// (`DecoderWeights::create` + `fill_random`).
pub const TINY_LLAMA: DecoderHparams = DecoderHparams {
    n_vocab: 300,
    n_embd: 64,
    n_layer: 2,
    n_head: 4,
    n_head_kv: 2,
    head_dim: 16,
    n_ff: 96,
    rope_base: 10000.0,
    n_ctx_train: 512,
    ..DecoderHparams::SMOLLM2_135M
};

/// Fills `t` (F32/F16/BF16) with seeded values in `[-scale, scale)`.
pub fn fill(ctx: &mut Context, t: TensorId, seed: u64, scale: f32) -> crate::Result<()> {
    let n = ctx.desc(t)?.nelements();
    let mut rng = SplitMix64::new(seed);
    let values: Vec<f32> = (0..n).map(|_| scale * rng.uniform()).collect();
    Ok(ctx.set_f32(t, &values)?)
}

/// Largest absolute difference between two slices (infinite when their
/// lengths differ).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}
