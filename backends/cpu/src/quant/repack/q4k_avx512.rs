//! AVX-512 kernels of the repacked Q4_K and Q5_K layouts ([`super::q4k_layout`]): a
//! group's 16 rows are the 16 i32 lanes of one register, as in
//! [`super::avx512`]. Per sub-block (32 values) and activation column,
//! eight byte products against the column's 4-byte words broadcast give
//! the 16 rows' integer sums, which one multiply by the rows' scales (read
//! as bytes, widened) adds to the super-block's sum; the mins' term is
//! four `vpmaddwd` per super-block (the rows' min pairs against the
//! column's pairs of sub-block sums); then two fused multiply-adds per
//! super-block. No horizontal sum anywhere.
//!
//! With VNNI the byte products are `vpdpbusd` into i32 and the scale is a
//! `vpmulld`; without, `vpmaddubsw` pairs summed in i16 (a sub-block's
//! eight: 8·2·15·128 = 30720, no saturation) and one `vpmaddwd` against the
//! scale in both halves of each lane, which multiplies and widens at once.
//! The same integers either way: the same bits. Q5_K's fifth bits are
//! one more load, shift, mask and `or` per chunk, and without VNNI its
//! 5-bit pairs (2·31·128) are summed four chunks at a time, not eight.
//!
//! One body, generic over `VNNI`, and two entry points, [`run_plain`] and
//! [`run_vnni`] (see [`super::super::dot_avx512`] for why one body is
//! compiled twice).

use std::arch::x86_64::*;

use super::Job;
use super::avx512::PREFETCH;
use super::layout::{GROUP_ROWS, groups};
use super::q4k_layout::{AUX, D, DMIN, MINS, QH, QS, RECORD, RECORD5, SC};
use crate::isa::{avx512_fn, avx512_vnni_fn};
use crate::prefetch::prefetch_l2;

/// Most activation columns one pass over a super-block serves (their
/// sub-block sums, super-block sums and accumulators in registers).
pub(crate) const MAX_COLS: usize = 8;

/// Reads the 4-byte word at `p` as an i32.
///
/// # Safety
/// `p` points to 4 readable bytes.
#[inline(always)]
unsafe fn word(p: *const u8) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { p.cast::<i32>().read_unaligned() }
}

avx512_fn! {
    /// The integer sums `Σ q·a` of sub-block `j` of the record `rec` for
    /// `C` columns, in two chains: with VNNI i32 lanes to be added, without
    /// i16 pairs to be widened (the second used only when `FIFTH`); `at`
    /// the offset of the sub-block's activations in each column.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ, and AVX512_VNNI when `VNNI`; `rec` points to a
    /// record (of Q5_K when `FIFTH`), each column to 32 bytes at `at`.
    #[inline]
    unsafe fn sub_block<const C: usize, const VNNI: bool, const FIFTH: bool>(
        rec: *const u8,
        j: usize,
        cols: &[*const u8; C],
        at: usize,
    ) -> [[__m512i; 2]; C] {
        let low = _mm512_set1_epi8(0x0F);
        let q = rec.wrapping_add(QS + 512 * (j / 2));
        // Few columns: two chains, so that a `vpdpbusd`'s latency does not bound the loop.
        let split = VNNI && C < 4;
        let mut sums = [[_mm512_setzero_si512(); 2]; C];
        for ch in 0..8 {
            // SAFETY: chunk ch of the pair's 512 bytes.
            let v = unsafe { _mm512_loadu_si512(q.add(64 * ch).cast()) };
            let mut w =
                if j % 2 == 1 { _mm512_and_si512(_mm512_srli_epi16::<4>(v), low) } else { _mm512_and_si512(v, low) };
            if FIFTH {
                // SAFETY: chunk ch of the record's fifth-bit plane.
                let h = unsafe { _mm512_loadu_si512(rec.add(QH + 64 * ch).cast()) };
                // Bit j of each byte to bit 4 (a 16-bit shift: what crosses
                // into the neighbouring byte falls outside the mask).
                let h = match j {
                    0 => _mm512_slli_epi16::<4>(h),
                    1 => _mm512_slli_epi16::<3>(h),
                    2 => _mm512_slli_epi16::<2>(h),
                    3 => _mm512_slli_epi16::<1>(h),
                    4 => h,
                    5 => _mm512_srli_epi16::<1>(h),
                    6 => _mm512_srli_epi16::<2>(h),
                    _ => _mm512_srli_epi16::<3>(h),
                };
                w = _mm512_or_si512(w, _mm512_and_si512(h, _mm512_set1_epi8(0x10)));
            }
            for c in 0..C {
                // SAFETY: word ch of the sub-block's 32 activation bytes.
                let a = _mm512_set1_epi32(unsafe { word(cols[c].add(at + 4 * ch)) });
                // Without VNNI, 5-bit pairs (2·31·128) sum four chunks to a chain in i16.
                let chain = if split {
                    ch % 2
                } else if FIFTH && !VNNI {
                    ch / 4
                } else {
                    0
                };
                let s = &mut sums[c][chain];
                *s = if VNNI {
                    // SAFETY: AVX512_VNNI (the caller's contract).
                    unsafe { _mm512_dpbusd_epi32(*s, w, a) }
                } else {
                    _mm512_add_epi16(*s, _mm512_maddubs_epi16(w, a))
                };
            }
        }
        sums
    }
}

avx512_fn! {
    /// Group `g` of `job` times its columns `c0 .. c0 + C`, every super-block.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ, and AVX512_VNNI when `VNNI`; the job's contract;
    /// `c0 + C` within the job's columns.
    #[inline]
    unsafe fn group_product<const C: usize, const VNNI: bool, const FIFTH: bool>(
        job: &Job,
        g: usize,
        c0: usize,
        prefetch: bool,
    ) {
        let record = if FIFTH { RECORD5 } else { RECORD };
        let cl = &job.col_layout;
        let group = job.data.wrapping_add(g * job.layout.bytes);
        // The matrix's last byte: past it lie lines nobody here wants.
        let end = job.data.wrapping_add(groups(job.m) * job.layout.bytes);
        let cols: [*const u8; C] = std::array::from_fn(|j| job.col(c0 + j));
        let mut acc = [_mm512_setzero_ps(); C];
        for b in 0..job.layout.nb {
            let rec = group.wrapping_add(b * record);
            if prefetch {
                prefetch_l2(rec.wrapping_add(PREFETCH), record, end);
            }
            // SAFETY: super-block b's record lies inside the group, its
            // activations, scale and aux words inside each column (the job's contract).
            unsafe {
                let mut isum = [_mm512_setzero_si512(); C];
                for j in 0..8 {
                    let sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(rec.add(SC + 16 * j).cast()));
                    let sums = sub_block::<C, VNNI, FIFTH>(rec, j, &cols, 256 * b + 32 * j);
                    if VNNI {
                        for c in 0..C {
                            let s = _mm512_add_epi32(sums[c][0], sums[c][1]);
                            isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(s, sc));
                        }
                    } else {
                        // The scale in both i16 halves of its lane: `vpmaddwd` multiplies and widens.
                        let sc2 = _mm512_or_si512(sc, _mm512_slli_epi32::<16>(sc));
                        for c in 0..C {
                            isum[c] = _mm512_add_epi32(isum[c], _mm512_madd_epi16(sums[c][0], sc2));
                            if FIFTH {
                                isum[c] = _mm512_add_epi32(isum[c], _mm512_madd_epi16(sums[c][1], sc2));
                            }
                        }
                    }
                }
                let mins: [__m512i; 4] =
                    std::array::from_fn(|p| _mm512_cvtepu8_epi16(_mm256_loadu_si256(rec.add(MINS + 32 * p).cast())));
                let d = _mm512_cvtph_ps(_mm256_loadu_si256(rec.add(D).cast()));
                let dmin = _mm512_cvtph_ps(_mm256_loadu_si256(rec.add(DMIN).cast()));
                for c in 0..C {
                    let aux = cols[c].add(cl.aux_at + AUX * b);
                    let mut msum = _mm512_setzero_si512();
                    for (p, &m) in mins.iter().enumerate() {
                        msum = _mm512_add_epi32(msum, _mm512_madd_epi16(m, _mm512_set1_epi32(word(aux.add(4 * p)))));
                    }
                    let da = _mm512_set1_ps(f32::from_bits(word(cols[c].add(cl.d_at + 4 * b)) as u32));
                    acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_mul_ps(d, da), acc[c]);
                    acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, da), acc[c]);
                }
            }
        }
        let rows = job.rows_of(g);
        let mask: __mmask16 = if rows >= GROUP_ROWS { !0 } else { (1 << rows) - 1 };
        for (c, &v) in acc.iter().enumerate() {
            // SAFETY: rows 16g .. 16g + rows of column c0 + c are inside dst and this job's.
            unsafe { _mm512_mask_storeu_ps(job.out(g, c0 + c), mask, v) };
        }
    }
}

/// Defines the entry points of one path, as [`super::avx512`] does.
macro_rules! entry_points {
    ($feature_fn:ident, $vnni:literal, $group:ident, $run:ident, $what:literal) => {
        $feature_fn! {
            #[doc = concat!("[`group_product`] with ", $what, ".")]
            ///
            /// # Safety
            /// As [`group_product`].
            unsafe fn $group<const C: usize, const FIFTH: bool>(job: &Job, g: usize, c0: usize, prefetch: bool) {
                // SAFETY: this function enables the features the body needs.
                unsafe { group_product::<C, $vnni, FIFTH>(job, g, c0, prefetch) }
            }
        }

        #[doc = concat!("Runs a repacked Q4_K (Q5_K when `FIFTH`) `job` with ", $what, ".")]
        ///
        /// # Safety
        /// As [`Job`] says, and the CPU has the path's features.
        pub(crate) unsafe fn $run<const FIFTH: bool>(job: &Job) {
            let pass: [unsafe fn(&Job, usize, usize, bool); MAX_COLS] = [
                $group::<1, FIFTH>,
                $group::<2, FIFTH>,
                $group::<3, FIFTH>,
                $group::<4, FIFTH>,
                $group::<5, FIFTH>,
                $group::<6, FIFTH>,
                $group::<7, FIFTH>,
                $group::<8, FIFTH>,
            ];
            // SAFETY: the caller's contract.
            unsafe { job.in_passes(pass) }
        }
    };
}

entry_points!(
    avx512_fn,
    false,
    group_plain,
    run_plain,
    "byte products by `vpmaddubsw`, scales by `vpmaddwd` (AVX-512 F/BW/VL/DQ)"
);
entry_points!(
    avx512_vnni_fn,
    true,
    group_vnni,
    run_vnni,
    "byte products by `vpdpbusd`, scales by `vpmulld` (AVX-512 F/BW/VL/DQ and AVX512_VNNI)"
);
