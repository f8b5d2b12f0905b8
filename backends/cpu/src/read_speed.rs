//! Reading memory as fast as the kernels can: the loop behind the memory
//! floor (`gantry bench`), a wrapping sum of 64-bit words with the widest
//! vector loads of the kernels' instruction-set path.

use crate::isa::Isa;

/// The words' wrapping sum, with the widest loads the kernels' path has
/// (the CPU's fastest, or the one `GANTRY_CPU_ISA` caps them at): how many
/// cache lines a core keeps in flight depends on the loads per line (a
/// 92 MiB read on one Xeon core: 19.5 GB/s with 16-byte loads, 28.9 with
/// 64-byte ones), and a floor read with narrower loads than the kernels'
/// would be too low.
pub fn sum_words(words: &[u64]) -> u64 {
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

    #[test]
    fn every_path_sums_like_a_plain_loop() {
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
