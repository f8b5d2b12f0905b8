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

use gantry::backends::cpu::{AlignedBytes, Isa};
use gantry::{Context, Op, TensorId};

/// Bytes each timed pass reads at least (the buffer again and again), so
/// that starting the threads is a small part of a pass.
const PASS_BYTES: usize = 1 << 30;
/// Timed passes; the fastest counts.
const PASSES: usize = 5;

/// Bytes of the weights that the products (`MUL_MAT`) of the graph ending
/// in `root` read, each weight counted once (the output matrix included).
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
        if d.op == Op::MulMat
            && let Some(w) = d.srcs[0]
            && let Some(wd) = ctx.get(w)
        {
            let base = wd.view_src.unwrap_or(w);
            if weights.contains(&base) && counted.insert(w) {
                bytes += wd.nbytes();
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
                .map(|part| s.spawn(move || (0..rounds).fold(0u64, |acc, _| acc.wrapping_add(sum_words(part)))))
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

/// The words' wrapping sum, with the widest loads the kernels' path has
/// (the CPU's fastest, or the one `GANTRY_CPU_ISA` caps them at): how many
/// cache lines a core keeps in flight depends on the loads per line (a
/// 92 MiB read on one Xeon core: 19.5 GB/s with 16-byte loads, 28.9 with
/// 64-byte ones), and a floor read with narrower loads than the kernels'
/// would be too low.
fn sum_words(words: &[u64]) -> u64 {
    match Isa::best() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: both AVX-512 paths are taken only on a CPU with AVX-512 F.
        Isa::Avx512 | Isa::Avx512Vnni => unsafe { x86::sum_avx512(words) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the AVX2 path is taken only on a CPU with AVX2.
        Isa::Avx2 => unsafe { x86::sum_avx2(words) },
        Isa::Scalar => sum_lanes(words),
    }
}

/// The sum in eight independent lanes (the compiler vectorizes it with the
/// build's baseline features): the loop is bound by loads, not by one
/// chain of adds.
fn sum_lanes(words: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    let mut blocks = words.chunks_exact(8);
    for block in &mut blocks {
        for (l, w) in lanes.iter_mut().zip(block) {
            *l = l.wrapping_add(*w);
        }
    }
    lanes.iter().chain(blocks.remainder()).fold(0, |a, &b| a.wrapping_add(b))
}

/// The read loops with one whole vector load per 64 or 32 bytes, in four
/// independent accumulators (the compiler turns [`sum_lanes`] into scalar
/// code when asked for 512-bit lanes).
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The wrapping sum of `words` with 64-byte loads.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn sum_avx512(words: &[u64]) -> u64 {
        let mut acc = [_mm512_setzero_si512(); 4];
        let mut blocks = words.chunks_exact(32);
        for block in &mut blocks {
            for (j, a) in acc.iter_mut().enumerate() {
                // SAFETY: words 8j .. 8j + 8 of a block of 32.
                let v = unsafe { _mm512_loadu_si512(block.as_ptr().add(8 * j).cast()) };
                *a = _mm512_add_epi64(*a, v);
            }
        }
        let total = _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3]));
        (_mm512_reduce_add_epi64(total) as u64).wrapping_add(super::sum_lanes(blocks.remainder()))
    }

    /// The wrapping sum of `words` with 32-byte loads.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn sum_avx2(words: &[u64]) -> u64 {
        let mut acc = [_mm256_setzero_si256(); 4];
        let mut blocks = words.chunks_exact(16);
        for block in &mut blocks {
            for (j, a) in acc.iter_mut().enumerate() {
                // SAFETY: words 4j .. 4j + 4 of a block of 16.
                let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(4 * j).cast()) };
                *a = _mm256_add_epi64(*a, v);
            }
        }
        let mut lanes = [0u64; 4];
        for a in acc {
            let mut part = [0u64; 4];
            // SAFETY: `part` holds 32 bytes.
            unsafe { _mm256_storeu_si256(part.as_mut_ptr().cast(), a) };
            for (l, p) in lanes.iter_mut().zip(part) {
                *l = l.wrapping_add(p);
            }
        }
        super::sum_lanes(&lanes).wrapping_add(super::sum_lanes(blocks.remainder()))
    }
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
        assert_eq!(sum_words(&[1, 2, 3, 4, 5, 6, 7, 8, 9]), 45);
        // Every path (lanes and remainder) against a plain sum.
        let words: Vec<u64> = (0..1000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let plain = words.iter().fold(0u64, |a, &b| a.wrapping_add(b));
        assert_eq!(sum_lanes(&words), plain);
        assert_eq!(sum_words(&words), plain);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            assert_eq!(unsafe { x86::sum_avx2(&words) }, plain);
        }
    }
}
