//! AVX2 kernels of the repacked Q2_K and Q3_K layouts:
//! [`super::q23k_avx512`]'s arithmetic without VNNI on 256-bit registers, a
//! group's 16 rows as two halves of 8 i32 lanes (the low and high 32 bytes
//! of each 64-byte chunk, the low and high 8 bytes of each scale row, the
//! low and high 16 bytes of each min-pair row).

use std::arch::x86_64::*;

use super::avx2::store_rows;
use super::avx512::PREFETCH;
use super::layout::{GROUP_ROWS, groups};
use super::q23k_layout::{
    Q2_AUX, Q2_D, Q2_DMIN, Q2_MINS, Q2_QS, Q2_RECORD, Q2_SC, Q3_AUX, Q3_D, Q3_HM, Q3_QS, Q3_RECORD, Q3_SC,
};
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
    /// The quants of chunk `c` of run `f` of half `h` of a record, for the
    /// 8 rows of half-group `half`: Q2_K's 0..4, Q3_K's 0..8.
    ///
    /// # Safety
    /// AVX2; `rec` points to a record of the type, `half` is 0 or 1.
    #[inline]
    unsafe fn weights<const Q3: bool>(rec: *const u8, half: usize, h: usize, f: usize, c: usize) -> __m256i {
        let qs = if Q3 { Q3_QS } else { Q2_QS };
        // SAFETY: the half of chunk c of the plane's part h, inside the record.
        let q = unsafe { _mm256_loadu_si256(rec.add(qs + 512 * h + 64 * c + 32 * half).cast()) };
        let low = match f {
            0 => q,
            1 => _mm256_srli_epi16::<2>(q),
            2 => _mm256_srli_epi16::<4>(q),
            _ => _mm256_srli_epi16::<6>(q),
        };
        let low = _mm256_and_si256(low, _mm256_set1_epi8(3));
        if !Q3 {
            return low;
        }
        // SAFETY: the half of chunk c of the hmask plane, inside the record.
        let m = unsafe { _mm256_loadu_si256(rec.add(Q3_HM + 64 * c + 32 * half).cast()) };
        let high = match 4 * h + f {
            0 => _mm256_slli_epi16::<2>(m),
            1 => _mm256_slli_epi16::<1>(m),
            2 => m,
            3 => _mm256_srli_epi16::<1>(m),
            4 => _mm256_srli_epi16::<2>(m),
            5 => _mm256_srli_epi16::<3>(m),
            6 => _mm256_srli_epi16::<4>(m),
            _ => _mm256_srli_epi16::<5>(m),
        };
        _mm256_or_si256(low, _mm256_and_si256(high, _mm256_set1_epi8(4)))
    }
}

avx2_fn! {
    /// Rows `8·half ..` of group `g` of `job` times its columns `c0 .. c0 + C`.
    ///
    /// # Safety
    /// AVX2, FMA, F16C; the job's contract; `c0 + C` within the job's columns.
    #[inline]
    unsafe fn half_product<const C: usize, const Q3: bool>(job: &Job, g: usize, half: usize, c0: usize, prefetch: bool) {
        let (record, aux_bytes) = if Q3 { (Q3_RECORD, Q3_AUX) } else { (Q2_RECORD, Q2_AUX) };
        let sc_at = if Q3 { Q3_SC } else { Q2_SC };
        let cl = &job.col_layout;
        let group = job.data.wrapping_add(g * job.layout.bytes);
        let end = job.data.wrapping_add(groups(job.m) * job.layout.bytes);
        let cols: [*const u8; C] = std::array::from_fn(|j| job.col(c0 + j));
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
                for sb in 0..16 {
                    let (h, f, part) = (sb / 8, (sb % 8) / 2, sb % 2);
                    // i16 pair sums of chunks 0, 1 and of 2, 3 (each within 2·2·7·128).
                    let mut pairs = [[_mm256_setzero_si256(); 2]; C];
                    for ch in 0..4 {
                        let w = weights::<Q3>(rec, half, h, f, 4 * part + ch);
                        for c in 0..C {
                            let a = _mm256_set1_epi32(word(cols[c].add(256 * b + 16 * sb + 4 * ch)));
                            pairs[c][ch / 2] = _mm256_add_epi16(pairs[c][ch / 2], _mm256_maddubs_epi16(w, a));
                        }
                    }
                    let sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(rec.add(sc_at + 16 * sb + HALF * half).cast()));
                    let sc2 =
                        _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32::<16>(sc));
                    for c in 0..C {
                        let s = _mm256_add_epi32(_mm256_madd_epi16(pairs[c][0], sc2), _mm256_madd_epi16(pairs[c][1], sc2));
                        let s = if Q3 {
                            let st = _mm256_set1_epi32(word(cols[c].add(cl.aux_at + aux_bytes * b + 4 * sb)));
                            _mm256_add_epi32(s, _mm256_mullo_epi32(st, sc))
                        } else {
                            s
                        };
                        isum[c] = _mm256_add_epi32(isum[c], s);
                    }
                }
                if Q3 {
                    let d = _mm256_cvtph_ps(_mm_loadu_si128(rec.add(Q3_D + 2 * HALF * half).cast()));
                    for c in 0..C {
                        let da = _mm256_set1_ps(f32::from_bits(word(cols[c].add(cl.d_at + 4 * b)) as u32));
                        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(d, da), acc[c]);
                    }
                } else {
                    let mins: [__m256i; 8] = std::array::from_fn(|p| {
                        _mm256_cvtepu8_epi16(_mm_loadu_si128(rec.add(Q2_MINS + 32 * p + 2 * HALF * half).cast()))
                    });
                    let d = _mm256_cvtph_ps(_mm_loadu_si128(rec.add(Q2_D + 2 * HALF * half).cast()));
                    let dmin = _mm256_cvtph_ps(_mm_loadu_si128(rec.add(Q2_DMIN + 2 * HALF * half).cast()));
                    for c in 0..C {
                        let aux = cols[c].add(cl.aux_at + aux_bytes * b);
                        let mut msum = _mm256_setzero_si256();
                        for (p, &m) in mins.iter().enumerate() {
                            msum = _mm256_add_epi32(msum, _mm256_madd_epi16(m, _mm256_set1_epi32(word(aux.add(4 * p)))));
                        }
                        let da = _mm256_set1_ps(f32::from_bits(word(cols[c].add(cl.d_at + 4 * b)) as u32));
                        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(d, da), acc[c]);
                        acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, da), acc[c]);
                    }
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
    /// Runs a repacked Q2_K (Q3_K when `Q3`) `job`: every group, half a
    /// group and at most [`MAX_COLS`] columns at a time (sized evenly).
    ///
    /// # Safety
    /// AVX2, FMA, F16C; as [`Job`] says.
    pub(crate) unsafe fn run<const Q3: bool>(job: &Job) {
        let pass: [HalfPass; MAX_COLS] = [
            half_product::<1,
            Q3>,
            half_product::<2,
            Q3>,
            half_product::<3,
            Q3>,
            half_product::<4,
            Q3>,
        ];
        // SAFETY: the caller's contract.
        unsafe { job.in_half_passes(HALF, pass) }
    }
}
