//! The values' pass of a block read in place, on AVX-512: the weighted F16
//! value rows of a block's live keys added into the output rows of up to
//! four (query, head) rows that share them, the rows' accumulators held in
//! registers for the whole block (4 × 64 floats: 16 of the 32 registers)
//! instead of loaded and stored again for every key. Each row gets, key by
//! key in order, the fused multiply-adds [`crate::simd::axpy_f16`]
//! gives it (per element, the same rounding whatever the vector width), so
//! the result has the same bits as the key-by-key pass.

use std::arch::x86_64::*;

use half::f16;

use crate::isa::avx512_fn;

/// Values per row the kernel takes (a decoder's usual head size).
pub(super) const DV: usize = 64;

avx512_fn! {
    /// `acc[r][..DV] += w[r][j] · value(j)` for every key `j` of `live`
    /// (bit `j`) whose weight `w[r][j]` for row `r` is not 0, keys in
    /// order; `value(j)` is the `DV` halves at `values + j · stride`.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ with F16C; each `acc[r]` points to `DV` floats
    /// no other row's does, each `w[r]` to 64; `values + j · stride` to
    /// `DV` halves for every key of `live`.
    pub(super) unsafe fn add_values<const R: usize>(
        acc: [*mut f32; R],
        w: [*const f32; R],
        values: *const u8,
        stride: usize,
        live: u64,
    ) {
        // SAFETY: the caller's contract, for every access below.
        unsafe {
            let mut sums: [[__m512; 4]; R] =
                std::array::from_fn(|r| std::array::from_fn(|c| _mm512_loadu_ps(acc[r].add(16 * c))));
            let mut keys = live;
            while keys != 0 {
                let j = keys.trailing_zeros() as usize;
                keys &= keys - 1;
                let row = values.add(j * stride).cast::<f16>();
                let x: [__m512; 4] =
                    std::array::from_fn(|c| _mm512_cvtph_ps(_mm256_loadu_si256(row.add(16 * c).cast())));
                for r in 0..R {
                    let wr = *w[r].add(j);
                    // A key the row does not see (weight 0) adds nothing, as alone.
                    if wr != 0.0 {
                        let a = _mm512_set1_ps(wr);
                        for c in 0..4 {
                            sums[r][c] = _mm512_fmadd_ps(a, x[c], sums[r][c]);
                        }
                    }
                }
            }
            for r in 0..R {
                for c in 0..4 {
                    _mm512_storeu_ps(acc[r].add(16 * c), sums[r][c]);
                }
            }
        }
    }
}
