//! `gantry bench`'s memory floor: decoding one token reads every weight
//! matrix the graph's products use once, so no decoder runs faster than
//! the machine's parallel read bandwidth divided by those bytes. Both are
//! measured here: the bytes from the decode graph itself, the bandwidth
//! with the benchmark's threads streaming through a buffer far larger than
//! the last-level cache — on huge pages, as the CPU backend's weights are
//! (on 4 KiB pages the same read measured a quarter slower on a 2-core
//! EPYC VM: a TLB miss every 4 KiB, and a floor the engine could beat).

use std::collections::HashSet;
use std::time::Instant;

use gantry::{Context, Op, TensorId};
use gantry_backends::cpu::AlignedBytes;

/// Bytes the streaming read covers (32× a 32 MiB L3).
const READ_BYTES: usize = 1 << 30;
/// Passes over the buffer; the fastest counts.
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

/// The machine's read bandwidth in bytes per second with `threads`
/// threads each summing its share of a 1 GiB buffer (the best of five
/// passes); `None` when the buffer cannot be allocated.
pub fn parallel_read_bandwidth(threads: usize) -> Option<f64> {
    // The CPU backend's own allocation: huge pages, as its weights get.
    let mut buffer = AlignedBytes::zeroed(READ_BYTES, "the memory floor's read").ok()?;
    let data: &mut [u64] = bytemuck::try_cast_slice_mut(buffer.bytes_mut()).ok()?;
    // Written, so every page is really there before the timed reads.
    for (i, w) in data.iter_mut().enumerate() {
        *w = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    let data = &*data;
    let threads = threads.max(1);
    let chunk = data.len().div_ceil(threads);
    let mut best = f64::INFINITY;
    for _ in 0..PASSES {
        let t0 = Instant::now();
        let sum = std::thread::scope(|s| {
            let parts: Vec<_> = data.chunks(chunk).map(|part| s.spawn(move || sum_words(part))).collect();
            parts.into_iter().map(|p| p.join().unwrap_or(0)).fold(0u64, u64::wrapping_add)
        });
        std::hint::black_box(sum);
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Some(READ_BYTES as f64 / best)
}

/// A sum the compiler vectorizes: eight independent lanes, so the loop is
/// bound by loads, not by one chain of adds.
fn sum_words(words: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    let mut blocks = words.chunks_exact(8);
    for block in &mut blocks {
        for (l, w) in lanes.iter_mut().zip(block) {
            *l = l.wrapping_add(*w);
        }
    }
    lanes.iter().chain(blocks.remainder()).fold(0, |a, &b| a.wrapping_add(b))
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
    }
}
