//! `gantry bench`'s memory floor: decoding one token reads every weight
//! matrix the graph's products use once, so no decoder runs faster than
//! the rate at which the machine can read those bytes, over and over, with
//! the benchmark's threads. Both are measured here: the bytes from the
//! decode graph itself, the rate by reading a buffer of the weights' own
//! size again and again, on huge pages as the CPU backend's weights lie
//! (on 4 KiB pages the same read measured a quarter slower on a 2-core
//! EPYC VM: a TLB miss every 4 KiB, and a floor the engine could beat).
//!
//! The buffer is the weights' size, not "far larger than the caches":
//! where the last-level cache holds the weights (a 2-core Xeon VM with a
//! 480 MiB L3 holds SmolLM2-135M's 92 MB), decoding reads them from the
//! cache, and a floor measured beyond it (DRAM: 16.4 GB/s on one thread
//! against 30.0 for a 92 MiB buffer) would credit the engine with the
//! cache's speed-up. Where the weights do not fit, the same read streams
//! from DRAM.

use std::collections::HashSet;
use std::time::Instant;

use gantry::backends::cpu::{AlignedBytes, read_speed};
use gantry::{Context, Op, TensorId};

/// Bytes each timed pass reads at least (the buffer again and again), so
/// that starting the threads is a small part of a pass.
const PASS_BYTES: usize = 1 << 30;
/// Timed passes; the fastest counts.
const PASSES: usize = 5;

/// Bytes of the weights that the products (`MUL_MAT`) of the graph ending
/// in `root` read, each weight counted once (the output matrix included);
/// of a mixture-of-experts product (`MUL_MAT_ID`), the experts its tokens
/// choose: `n_used` per token, at most every expert.
pub fn product_weight_bytes(ctx: &Context, root: TensorId, weights: &HashSet<TensorId>) -> usize {
    let mut seen = HashSet::new();
    let mut counted = HashSet::new();
    let mut stack = vec![root];
    let mut bytes = 0;
    while let Some(t) = stack.pop() {
        if !seen.insert(t) {
            continue;
        }
        let Some(d) = ctx.get(t) else { continue };
        if matches!(d.op, Op::MulMat | Op::MulMatId)
            && let Some(w) = d.srcs[0]
            && let Some(wd) = ctx.get(w)
        {
            let base = wd.view_src.unwrap_or(w);
            if weights.contains(&base) && counted.insert(w) {
                bytes += match d.srcs[2].and_then(|ids| ctx.get(ids)) {
                    // ids [n_used, n_tokens] pick among the ne[2] experts.
                    Some(ids) if d.op == Op::MulMatId => {
                        let n_expert = wd.ne[2].max(1);
                        let chosen = ids.ne[0].saturating_mul(ids.ne[1]).min(n_expert);
                        wd.nbytes() / n_expert * chosen
                    }
                    _ => wd.nbytes(),
                };
            }
        }
        stack.extend(d.sources());
        stack.extend(d.view_src);
    }
    bytes
}

/// The machine's read bandwidth in bytes per second for a working set of
/// `bytes` (at least 1 MiB): `threads` threads each sum their share of a
/// buffer that size, again and again until a pass has read
/// [`PASS_BYTES`]; the best of [`PASSES`] passes. `None` when the buffer
/// cannot be allocated.
pub fn parallel_read_bandwidth(threads: usize, bytes: usize) -> Option<f64> {
    let bytes = bytes.max(1 << 20).next_multiple_of(64);
    // The CPU backend's own allocation: huge pages, as its weights get.
    let mut buffer = AlignedBytes::zeroed(bytes, "the memory floor's read").ok()?;
    let data: &mut [u64] = bytemuck::try_cast_slice_mut(buffer.bytes_mut()).ok()?;
    // Written, so every page is really there before the timed reads.
    for (i, w) in data.iter_mut().enumerate() {
        *w = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    let data = &*data;
    let threads = threads.max(1);
    let chunk = data.len().div_ceil(threads);
    let rounds = PASS_BYTES.div_ceil(bytes);
    // One untimed round first, so that a buffer the caches hold starts there, as decoding's weights do.
    let pass = |rounds: usize| {
        std::thread::scope(|s| {
            let parts: Vec<_> = data
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || (0..rounds).fold(0u64, |acc, _| acc.wrapping_add(read_speed::sum_words(part))))
                })
                .collect();
            parts.into_iter().map(|p| p.join().unwrap_or(0)).fold(0u64, u64::wrapping_add)
        })
    };
    std::hint::black_box(pass(1));
    let mut best = f64::INFINITY;
    for _ in 0..PASSES {
        let t0 = Instant::now();
        std::hint::black_box(pass(rounds));
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Some((rounds * bytes) as f64 / best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry::DType;

    #[test]
    fn only_the_weights_products_read_are_counted_once() {
        let mut ctx = Context::new();
        let w = ctx.tensor(DType::F32, [16, 8]).unwrap();
        let out = ctx.tensor(DType::F32, [8, 4]).unwrap();
        let x = ctx.tensor(DType::F32, [16]).unwrap();
        let h = ctx.mul_mat(w, x).unwrap();
        let h2 = ctx.mul_mat(w, x).unwrap();
        let s = ctx.add(h, h2).unwrap();
        // A product of two activations reads no weights.
        let act = ctx.mul_mat(s, s).unwrap();
        let y = ctx.mul_mat(out, s).unwrap();
        let root = ctx.add(y, act).unwrap();
        let weights = HashSet::from([w, out]);
        assert_eq!(product_weight_bytes(&ctx, root, &weights), 16 * 8 * 4 + 8 * 4 * 4);
    }

    #[test]
    fn an_expert_product_counts_the_experts_its_tokens_choose() {
        let mut ctx = Context::new();
        // 8 experts of 16 x 4 F32 (256 bytes each).
        let experts = ctx.tensor(DType::F32, [16, 4, 8]).unwrap();
        let weights = HashSet::from([experts]);
        for (n_used, n_tokens, chosen) in [(2, 1, 2), (2, 3, 6), (3, 5, 8)] {
            let x = ctx.tensor(DType::F32, [16, 1, n_tokens]).unwrap();
            let ids = ctx.tensor(DType::I32, [n_used, n_tokens]).unwrap();
            let y = ctx.mul_mat_id(experts, x, ids).unwrap();
            assert_eq!(product_weight_bytes(&ctx, y, &weights), chosen * 256, "{n_used} used by {n_tokens} tokens");
        }
    }
}
