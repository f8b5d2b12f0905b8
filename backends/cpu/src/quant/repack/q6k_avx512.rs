//! AVX-512 kernels of the repacked Q6_K layout ([`super::q6k_layout`]): a
//! group's 16 rows are the 16 i32 lanes of one register, as in
//! [`super::avx512`]. A sub-block (16 values) is four 64-byte chunks of
//! each plane: per chunk, the `ql` nibble and the `qh` bit pair shifted
//! into place and or-ed give the 16 rows' next 4 quants (`q + 32`,
//! unsigned); per activation column, four byte products against its
//! words broadcast give the rows' sums, started at the column's
//! `−32·bsum` of the sub-block, and one `vpmulld` by the rows' scales
//! (signed bytes, widened) adds them to the super-block's integer; one
//! fused multiply-add per super-block.
//!
//! Without VNNI the byte products are `vpmaddubsw` (two chunks' pairs
//! summed in i16: 2·2·63·128 = 32256, no saturation), widened and scaled
//! by `vpmaddwd` against the scale in both halves of each lane, and the
//! start's term is a `vpmulld` of its own. The same integers: the same bits.

use std::arch::x86_64::*;

use super::Job;
use super::avx512::PREFETCH;
use super::layout::{GROUP_ROWS, groups};
use super::q6k_layout::{AUX, D, QH, QL, RECORD, SC};
use crate::isa::{avx512_fn, avx512_vnni_fn};
use crate::prefetch::prefetch_l2;

/// Most activation columns one pass over a super-block serves.
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
    /// The quants `q + 32` of chunk `c` of run `f` of half `h` of a record
    /// (values `128h + 32f + 4c ..`, 4 a row).
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ; `rec` points to a record.
    #[inline]
    unsafe fn weights(rec: *const u8, h: usize, f: usize, c: usize) -> __m512i {
        // SAFETY: chunk c of the two planes' parts, inside the record.
        let (l, q) = unsafe {
            (
                _mm512_loadu_si512(rec.add(QL + 512 * (2 * h + f % 2) + 64 * c).cast()),
                _mm512_loadu_si512(rec.add(QH + 512 * h + 64 * c).cast()),
            )
        };
        let low = if f < 2 { l } else { _mm512_srli_epi16::<4>(l) };
        // Bits 2f, 2f + 1 of each byte to bits 4, 5 (a 16-bit shift: what
        // crosses into the neighbouring byte falls outside the mask).
        let high = match f {
            0 => _mm512_slli_epi16::<4>(q),
            1 => _mm512_slli_epi16::<2>(q),
            2 => q,
            _ => _mm512_srli_epi16::<2>(q),
        };
        _mm512_or_si512(_mm512_and_si512(low, _mm512_set1_epi8(0x0F)), _mm512_and_si512(high, _mm512_set1_epi8(0x30)))
    }
}

avx512_fn! {
    /// `sc_g·(−32·bs_g + Σ u·a)` of sub-block `g` for `C` columns, one i32
    /// lane a row; `at` the offset of the sub-block's activations in each
    /// column, `start` that of its start word.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ, and AVX512_VNNI when `VNNI`; `rec` points to a
    /// record, each column to 16 bytes at `at` and 4 at `start`.
    #[inline]
    unsafe fn sub_block<const C: usize, const VNNI: bool>(
        rec: *const u8,
        g: usize,
        cols: &[*const u8; C],
        at: usize,
        start: usize,
    ) -> [__m512i; C] {
        let (h, f, part) = (g / 8, (g % 8) / 2, g % 2);
        // SAFETY: the sub-block's 16 scale bytes lie inside the record.
        let sc = _mm512_cvtepi8_epi32(unsafe { _mm_loadu_si128(rec.add(SC + 16 * g).cast()) });
        // Few columns: two chains, so that a `vpdpbusd`'s latency does not bound the loop.
        let split = VNNI && C < 4;
        let mut sums = [[_mm512_setzero_si512(); 2]; C];
        if VNNI {
            for (c, s) in sums.iter_mut().enumerate() {
                // SAFETY: the column's start word (the caller's contract).
                s[0] = _mm512_set1_epi32(unsafe { word(cols[c].add(start)) });
            }
        }
        for ch in 0..4 {
            // SAFETY: the caller's contract.
            let w = unsafe { weights(rec, h, f, 4 * part + ch) };
            for c in 0..C {
                // SAFETY: word ch of the sub-block's 16 activation bytes.
                let a = _mm512_set1_epi32(unsafe { word(cols[c].add(at + 4 * ch)) });
                if VNNI {
                    let s = &mut sums[c][if split { ch % 2 } else { 0 }];
                    // SAFETY: AVX512_VNNI (the caller's contract).
                    *s = unsafe { _mm512_dpbusd_epi32(*s, w, a) };
                } else {
                    // i16 pair sums of chunks 0, 1 in chain 0 and of 2, 3 in chain 1.
                    let s = &mut sums[c][ch / 2];
                    *s = _mm512_add_epi16(*s, _mm512_maddubs_epi16(w, a));
                }
            }
        }
        std::array::from_fn(|c| {
            if VNNI {
                let s = if split { _mm512_add_epi32(sums[c][0], sums[c][1]) } else { sums[c][0] };
                _mm512_mullo_epi32(s, sc)
            } else {
                // The scale in both i16 halves of its lane: `vpmaddwd` multiplies and widens.
                let sc2 = _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32::<16>(sc));
                let s = _mm512_add_epi32(_mm512_madd_epi16(sums[c][0], sc2), _mm512_madd_epi16(sums[c][1], sc2));
                // SAFETY: the column's start word (the caller's contract).
                let st = _mm512_set1_epi32(unsafe { word(cols[c].add(start)) });
                _mm512_add_epi32(s, _mm512_mullo_epi32(st, sc))
            }
        })
    }
}

avx512_fn! {
    /// Group `g` of `job` times its columns `c0 .. c0 + C`, every super-block.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ, and AVX512_VNNI when `VNNI`; the job's contract;
    /// `c0 + C` within the job's columns.
    #[inline]
    unsafe fn group_product<const C: usize, const VNNI: bool>(job: &Job, g: usize, c0: usize, prefetch: bool) {
        let cl = &job.col_layout;
        let group = job.data.wrapping_add(g * job.layout.bytes);
        let end = job.data.wrapping_add(groups(job.m) * job.layout.bytes);
        let cols: [*const u8; C] = std::array::from_fn(|j| job.col(c0 + j));
        let mut acc = [_mm512_setzero_ps(); C];
        for b in 0..job.layout.nb {
            let rec = group.wrapping_add(b * RECORD);
            if prefetch {
                prefetch_l2(rec.wrapping_add(PREFETCH), RECORD, end);
            }
            // SAFETY: super-block b's record lies inside the group, its
            // activations, scale and aux words inside each column (the job's contract).
            unsafe {
                let mut isum = [_mm512_setzero_si512(); C];
                for sb in 0..16 {
                    let s = sub_block::<C, VNNI>(rec, sb, &cols, 256 * b + 16 * sb, cl.aux_at + AUX * b + 4 * sb);
                    for c in 0..C {
                        isum[c] = _mm512_add_epi32(isum[c], s[c]);
                    }
                }
                let d = _mm512_cvtph_ps(_mm256_loadu_si256(rec.add(D).cast()));
                for c in 0..C {
                    let da = _mm512_set1_ps(f32::from_bits(word(cols[c].add(cl.d_at + 4 * b)) as u32));
                    acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_mul_ps(d, da), acc[c]);
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
            unsafe fn $group<const C: usize>(job: &Job, g: usize, c0: usize, prefetch: bool) {
                // SAFETY: this function enables the features the body needs.
                unsafe { group_product::<C, $vnni>(job, g, c0, prefetch) }
            }
        }

        #[doc = concat!("Runs a repacked Q6_K `job` with ", $what, ".")]
        ///
        /// # Safety
        /// As [`Job`] says, and the CPU has the path's features.
        pub(crate) unsafe fn $run(job: &Job) {
            let pass: [unsafe fn(&Job, usize, usize, bool); MAX_COLS] = [
                $group::<1>,
                $group::<2>,
                $group::<3>,
                $group::<4>,
                $group::<5>,
                $group::<6>,
                $group::<7>,
                $group::<8>,
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
