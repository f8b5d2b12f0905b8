//! AVX-512 kernels of the repacked Q2_K and Q3_K layouts
//! ([`super::q23k_layout`]), [`super::q6k_avx512`]'s arithmetic on their
//! planes: a group's 16 rows are the 16 i32 lanes of one register; a
//! sub-block (16 values) is four 64-byte chunks of the `qs` plane (and of
//! Q3_K's `hmask` plane), each shifted and masked (and or-ed) into the 16
//! rows' next 4 quants (unsigned); per activation column, four byte
//! products against its words broadcast give the rows' sums (Q3_K's
//! started at the column's `−4·bsum` of the sub-block), and one `vpmulld`
//! by the rows' scales adds them to the super-block's integer. Q2_K's mins
//! are 8 `vpmaddwd` of min pairs by the column's pairs of sub-block sums.
//! One fused multiply-add per super-block (two for Q2_K).
//!
//! Without VNNI the byte products are `vpmaddubsw` (two chunks' pairs
//! summed in i16: at most 2·2·7·128 = 3584), widened and scaled by
//! `vpmaddwd` against the scale in both halves of each lane, and Q3_K's
//! start term is a `vpmulld` of its own. The same integers: the same bits.

use std::arch::x86_64::*;

use super::Job;
use super::avx512::PREFETCH;
use super::layout::{GROUP_ROWS, groups};
use super::q23k_layout::{
    Q2_AUX, Q2_D, Q2_DMIN, Q2_MINS, Q2_QS, Q2_RECORD, Q2_SC, Q3_AUX, Q3_D, Q3_HM, Q3_QS, Q3_RECORD, Q3_SC,
};
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
    /// The quants of chunk `c` of run `f` of half `h` of a record (values
    /// `128h + 32f + 4c ..`, 4 a row): Q2_K's 0..4, Q3_K's 0..8.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ; `rec` points to a record of the type.
    #[inline]
    unsafe fn weights<const Q3: bool>(rec: *const u8, h: usize, f: usize, c: usize) -> __m512i {
        let qs = if Q3 { Q3_QS } else { Q2_QS };
        // SAFETY: chunk c of the plane's part h, inside the record.
        let q = unsafe { _mm512_loadu_si512(rec.add(qs + 512 * h + 64 * c).cast()) };
        // Bits 2f, 2f + 1 of each byte to bits 0, 1 (a 16-bit shift: what
        // crosses in from the neighbouring byte falls outside the mask).
        let low = match f {
            0 => q,
            1 => _mm512_srli_epi16::<2>(q),
            2 => _mm512_srli_epi16::<4>(q),
            _ => _mm512_srli_epi16::<6>(q),
        };
        let low = _mm512_and_si512(low, _mm512_set1_epi8(3));
        if !Q3 {
            return low;
        }
        // SAFETY: chunk c of the hmask plane, inside the record.
        let m = unsafe { _mm512_loadu_si512(rec.add(Q3_HM + 64 * c).cast()) };
        // Bit 4h + f of each byte to bit 2 (what crosses bytes lands on bits 0, 1 or 3 and up).
        let high = match 4 * h + f {
            0 => _mm512_slli_epi16::<2>(m),
            1 => _mm512_slli_epi16::<1>(m),
            2 => m,
            3 => _mm512_srli_epi16::<1>(m),
            4 => _mm512_srli_epi16::<2>(m),
            5 => _mm512_srli_epi16::<3>(m),
            6 => _mm512_srli_epi16::<4>(m),
            _ => _mm512_srli_epi16::<5>(m),
        };
        _mm512_or_si512(low, _mm512_and_si512(high, _mm512_set1_epi8(4)))
    }
}

avx512_fn! {
    /// `sc_g·(start_g + Σ q·a)` of sub-block `g` for `C` columns, one i32
    /// lane a row; `at` the offset of the sub-block's activations in each
    /// column, `start` that of its start word (Q3_K only).
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ, and AVX512_VNNI when `VNNI`; `rec` points to a
    /// record, each column to 16 bytes at `at` (and, for Q3_K, 4 at `start`).
    #[inline]
    unsafe fn sub_block<const C: usize, const VNNI: bool, const Q3: bool>(
        rec: *const u8,
        g: usize,
        cols: &[*const u8; C],
        at: usize,
        start: usize,
    ) -> [__m512i; C] {
        let (h, f, part) = (g / 8, (g % 8) / 2, g % 2);
        let sc_at = if Q3 { Q3_SC } else { Q2_SC };
        // SAFETY: the sub-block's 16 scale bytes lie inside the record.
        let sc = _mm512_cvtepi8_epi32(unsafe { _mm_loadu_si128(rec.add(sc_at + 16 * g).cast()) });
        // Few columns: two chains, so that a `vpdpbusd`'s latency does not bound the loop.
        let split = VNNI && C < 4;
        let mut sums = [[_mm512_setzero_si512(); 2]; C];
        if VNNI && Q3 {
            for (c, s) in sums.iter_mut().enumerate() {
                // SAFETY: the column's start word (the caller's contract).
                s[0] = _mm512_set1_epi32(unsafe { word(cols[c].add(start)) });
            }
        }
        for ch in 0..4 {
            // SAFETY: the caller's contract.
            let w = unsafe { weights::<Q3>(rec, h, f, 4 * part + ch) };
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
                if Q3 {
                    // SAFETY: the column's start word (the caller's contract).
                    let st = _mm512_set1_epi32(unsafe { word(cols[c].add(start)) });
                    _mm512_add_epi32(s, _mm512_mullo_epi32(st, sc))
                } else {
                    s
                }
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
    unsafe fn group_product<const C: usize, const VNNI: bool, const Q3: bool>(
        job: &Job,
        g: usize,
        c0: usize,
        prefetch: bool,
    ) {
        let (record, aux_bytes) = if Q3 { (Q3_RECORD, Q3_AUX) } else { (Q2_RECORD, Q2_AUX) };
        let cl = &job.col_layout;
        let group = job.data.wrapping_add(g * job.layout.bytes);
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
                for sb in 0..16 {
                    let start = cl.aux_at + aux_bytes * b + 4 * sb;
                    let s = sub_block::<C, VNNI, Q3>(rec, sb, &cols, 256 * b + 16 * sb, start);
                    for c in 0..C {
                        isum[c] = _mm512_add_epi32(isum[c], s[c]);
                    }
                }
                if Q3 {
                    let d = _mm512_cvtph_ps(_mm256_loadu_si256(rec.add(Q3_D).cast()));
                    for c in 0..C {
                        let da = _mm512_set1_ps(f32::from_bits(word(cols[c].add(cl.d_at + 4 * b)) as u32));
                        acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_mul_ps(d, da), acc[c]);
                    }
                } else {
                    let mins: [__m512i; 8] = std::array::from_fn(|p| {
                        _mm512_cvtepu8_epi16(_mm256_loadu_si256(rec.add(Q2_MINS + 32 * p).cast()))
                    });
                    let d = _mm512_cvtph_ps(_mm256_loadu_si256(rec.add(Q2_D).cast()));
                    let dmin = _mm512_cvtph_ps(_mm256_loadu_si256(rec.add(Q2_DMIN).cast()));
                    for c in 0..C {
                        let aux = cols[c].add(cl.aux_at + aux_bytes * b);
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
            unsafe fn $group<const C: usize, const Q3: bool>(job: &Job, g: usize, c0: usize, prefetch: bool) {
                // SAFETY: this function enables the features the body needs.
                unsafe { group_product::<C, $vnni, Q3>(job, g, c0, prefetch) }
            }
        }

        #[doc = concat!("Runs a repacked Q2_K (Q3_K when `Q3`) `job` with ", $what, ".")]
        ///
        /// # Safety
        /// As [`Job`] says, and the CPU has the path's features.
        pub(crate) unsafe fn $run<const Q3: bool>(job: &Job) {
            let pass: [unsafe fn(&Job, usize, usize, bool); MAX_COLS] = [
                $group::<1, Q3>,
                $group::<2, Q3>,
                $group::<3, Q3>,
                $group::<4, Q3>,
                $group::<5, Q3>,
                $group::<6, Q3>,
                $group::<7, Q3>,
                $group::<8, Q3>,
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
