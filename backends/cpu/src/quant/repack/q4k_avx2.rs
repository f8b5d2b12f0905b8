//! AVX2 kernels of the repacked Q4_K and Q5_K layouts: [`super::q4k_avx512`]'s
//! arithmetic without VNNI on 256-bit registers, a group's 16 rows as two
//! halves of 8 i32 lanes (the low and high 32 bytes of each 64-byte chunk,
//! the low and high 8 bytes of each scale row, 16 of each min pair row).
//!
//! With sixteen registers a half keeps up to [`MAX_COLS`] columns' i16
//! sub-block sums, super-block sums and accumulators while each weight
//! register is loaded once per sub-block.

use std::arch::x86_64::*;

use super::avx2::store_rows;
use super::avx512::PREFETCH;
use super::layout::{GROUP_ROWS, groups};
use super::q4k_layout::{AUX, D, DMIN, MINS, QH, QS, RECORD, RECORD5, SC};
use super::{HalfPass, Job};
use crate::isa::avx2_fn;
use crate::prefetch::prefetch_l2;

/// Most activation columns one pass over a super-block serves.
pub(crate) const MAX_COLS: usize = 4;
/// Rows per half group: the i32 lanes of one register.
const HALF: usize = GROUP_ROWS / 2;

/// Reads the 4-byte word at `p` as an i32.
///
/// # Safety
/// `p` points to 4 readable bytes.
#[inline(always)]
unsafe fn word(p: *const u8) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { p.cast::<i32>().read_unaligned() }
}

avx2_fn! {
    /// Rows `8·half ..` of group `g` of `job` times its columns `c0 .. c0 + C`.
    ///
    /// # Safety
    /// AVX2, FMA, F16C; the job's contract; `c0 + C` within the job's columns.
    #[inline]
    unsafe fn half_product<const C: usize, const FIFTH: bool>(
        job: &Job,
        g: usize,
        half: usize,
        c0: usize,
        prefetch: bool,
    ) {
        let record = if FIFTH { RECORD5 } else { RECORD };
        let cl = &job.col_layout;
        let group = job.data.wrapping_add(g * job.layout.bytes);
        let end = job.data.wrapping_add(groups(job.m) * job.layout.bytes);
        let cols: [*const u8; C] = std::array::from_fn(|j| job.col(c0 + j));
        let low = _mm256_set1_epi8(0x0F);
        let mut acc = [_mm256_setzero_ps(); C];
        for b in 0..job.layout.nb {
            let rec = group.wrapping_add(b * record);
            if prefetch {
                prefetch_l2(rec.wrapping_add(PREFETCH), record, end);
            }
            // SAFETY: super-block b's record lies inside the group, its
            // activations, scale and aux words inside each column (the job's contract).
            unsafe {
                let mut isum = [_mm256_setzero_si256(); C];
                for j in 0..8 {
                    let q = rec.add(QS + 512 * (j / 2) + 4 * HALF * half);
                    let mut pairs = [[_mm256_setzero_si256(); 2]; C];
                    for ch in 0..8 {
                        let v = _mm256_loadu_si256(q.add(64 * ch).cast());
                        let mut w = if j % 2 == 1 {
                            _mm256_and_si256(_mm256_srli_epi16::<4>(v), low)
                        } else {
                            _mm256_and_si256(v, low)
                        };
                        if FIFTH {
                            let h = _mm256_loadu_si256(rec.add(QH + 64 * ch + 4 * HALF * half).cast());
                            // Bit j of each byte to bit 4 (see `super::q4k_avx512`).
                            let h = match j {
                                0 => _mm256_slli_epi16::<4>(h),
                                1 => _mm256_slli_epi16::<3>(h),
                                2 => _mm256_slli_epi16::<2>(h),
                                3 => _mm256_slli_epi16::<1>(h),
                                4 => h,
                                5 => _mm256_srli_epi16::<1>(h),
                                6 => _mm256_srli_epi16::<2>(h),
                                _ => _mm256_srli_epi16::<3>(h),
                            };
                            w = _mm256_or_si256(w, _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
                        }
                        // 4-bit weights: a sub-block's eight pair sums stay within i16
                        // (30720); 5-bit ones four at a time (31744).
                        let chain = if FIFTH { ch / 4 } else { 0 };
                        for c in 0..C {
                            let a = _mm256_set1_epi32(word(cols[c].add(256 * b + 32 * j + 4 * ch)));
                            pairs[c][chain] = _mm256_add_epi16(pairs[c][chain], _mm256_maddubs_epi16(w, a));
                        }
                    }
                    let sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(rec.add(SC + 16 * j + HALF * half).cast()));
                    let sc2 = _mm256_or_si256(sc, _mm256_slli_epi32::<16>(sc));
                    for c in 0..C {
                        isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(pairs[c][0], sc2));
                        if FIFTH {
                            isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(pairs[c][1], sc2));
                        }
                    }
                }
                let d = _mm256_cvtph_ps(_mm_loadu_si128(rec.add(D + 2 * HALF * half).cast()));
                let dmin = _mm256_cvtph_ps(_mm_loadu_si128(rec.add(DMIN + 2 * HALF * half).cast()));
                for c in 0..C {
                    let aux = cols[c].add(cl.aux_at + AUX * b);
                    let mut msum = _mm256_setzero_si256();
                    for p in 0..4 {
                        let m = _mm256_cvtepu8_epi16(_mm_loadu_si128(rec.add(MINS + 32 * p + 2 * HALF * half).cast()));
                        msum = _mm256_add_epi32(msum, _mm256_madd_epi16(m, _mm256_set1_epi32(word(aux.add(4 * p)))));
                    }
                    let da = _mm256_set1_ps(f32::from_bits(word(cols[c].add(cl.d_at + 4 * b)) as u32));
                    acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(d, da), acc[c]);
                    acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, da), acc[c]);
                }
            }
        }
        let rows = job.rows_of(g).saturating_sub(HALF * half).min(HALF);
        for (c, &v) in acc.iter().enumerate() {
            let out = job.out(g, c0 + c).wrapping_add(HALF * half);
            // SAFETY: the half's first `rows` rows of column c0 + c are inside dst and this job's.
            unsafe { store_rows(out, v, rows) };
        }
    }
}

avx2_fn! {
    /// Runs a repacked Q4_K (Q5_K when `FIFTH`) `job`: every group, half a group and at most
    /// [`MAX_COLS`] columns at a time (sized evenly).
    ///
    /// # Safety
    /// AVX2, FMA, F16C; as [`Job`] says.
    pub(crate) unsafe fn run<const FIFTH: bool>(job: &Job) {
        let pass: [HalfPass; MAX_COLS] = [
            half_product::<1,
            FIFTH>,
            half_product::<2,
            FIFTH>,
            half_product::<3,
            FIFTH>,
            half_product::<4,
            FIFTH>,
        ];
        // SAFETY: the caller's contract.
        unsafe { job.in_half_passes(HALF, pass) }
    }
}
