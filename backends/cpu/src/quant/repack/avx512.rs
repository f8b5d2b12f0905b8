//! AVX-512 kernels of the repacked layout: a group's 16 rows are the 16 i32
//! lanes of one register, so a block costs, per activation column, eight
//! byte products against the column's 4-byte words broadcast from memory
//! (`vpdpbusd`'s `{1to16}` operand), one conversion and one or two fused
//! multiply-adds — and no horizontal sum anywhere: each column's 16 results
//! are one (masked) store.
//!
//! The weights of a block are loaded (and, for the 4-bit types, split into
//! nibbles) once for up to [`MAX_COLS`] columns, whose accumulators stay in
//! registers: the same kernel is the batch-1 mat-vec (one column: it streams
//! the weights) and the micro-kernel of batches (weights read once per
//! `MAX_COLS` columns).
//!
//! One body, generic over `VNNI`, and two entry points, [`run_plain`] and
//! [`run_vnni`] (see [`super::super::dot_avx512`] for why one body is
//! compiled twice). Without VNNI the byte products are `vpmaddubsw` +
//! `vpmaddwd`, whose i16 pair sums the 4-bit quants (≤ 15 · 128 · 2) keep
//! within range, eight of them too (a block's, widened once); Q8_0's
//! unsigned `q + 128` would not, so there the signed quants are multiplied
//! instead (`|q|` by the activation with `q`'s sign), starting from zero
//! rather than from `−128·Σa`.

use std::arch::x86_64::*;

use super::Job;
use super::layout::{ColumnLayout, GROUP_ROWS, GroupLayout, RepackType, groups};
use crate::isa::{avx512_fn, avx512_vnni_fn};
use crate::prefetch::prefetch_l2;
use crate::quant::dot_avx512::dot_bytes;

/// Most activation columns one pass over a block of weights serves.
pub(crate) const MAX_COLS: usize = 8;
/// Most columns whose mins' terms (Q4_1) are accumulated in the blocks'
/// loop itself; more take a second loop (see [`group_product`]).
const MINS_INLINE_MAX_COLS: usize = 4;

/// How far ahead of the quants being multiplied the first pass over a
/// group prefetches, into L2 (`_MM_HINT_T1`); a matrix's groups lie one
/// after the other, so this runs on into the next groups' scales and
/// quants, and stops at the matrix's last byte. Measured on a 4096 × 16384
/// Q4_1 matrix, one column, one thread, Zen 4, as a share of a plain read
/// of the same bytes: no prefetch 0.65, 4 KiB into L1 (`T0`) 0.65–0.75,
/// 16 KiB into L2 0.85–0.95 (8 KiB 0.85, 32 KiB no better). The L2
/// holds the lines long enough for a stride this far ahead; L1 does not.
pub(crate) const PREFETCH: usize = 16384;

/// Whether the high nibbles stay in place (`q & 0xF0`, 16 times the
/// value) rather than being shifted down: with VNNI, whose `vpdpbusd` takes
/// 240 · 127 · 4 per lane without saturating, their sum is 16 times the
/// true one, exactly, and one arithmetic shift of the block's sum undoes
/// it: four shifts a block fewer, the same integer.
const fn high_in_place<R: RepackType, const VNNI: bool>() -> bool {
    // Not with a fifth bit: 16 times a 5-bit value is no longer a byte.
    R::NIBBLES && VNNI && !R::FIFTH
}

avx512_fn! {
    /// The eight weight registers of one block (register `g`: the 16 rows'
    /// values `4g .. 4g + 4`, times 16 for `g ≥ 4` when
    /// [`high_in_place`]), from its quant area at `q`.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ; `q` points to one block's quant area.
    #[inline]
    unsafe fn weights<R: RepackType, const VNNI: bool>(q: *const u8) -> [__m512i; 8] {
        let mut w = [_mm512_setzero_si512(); 8];
        if R::NIBBLES {
            let low = _mm512_set1_epi8(0x0F);
            for c in 0..4 {
                // SAFETY: chunk c of the block's 256 quant bytes.
                let v = unsafe { _mm512_loadu_si512(q.add(64 * c).cast()) };
                w[c] = _mm512_and_si512(v, low);
                w[c + 4] = if high_in_place::<R, VNNI>() {
                    _mm512_andnot_si512(low, v)
                } else {
                    _mm512_and_si512(_mm512_srli_epi16::<4>(v), low)
                };
            }
            if R::FIFTH {
                // SAFETY: the block's fifth-bit plane, after its 256 nibble bytes.
                let h = unsafe { _mm512_loadu_si512(q.add(256).cast()) };
                let bit4 = _mm512_set1_epi8(0x10);
                // Bits 2c (low nibbles) and 2c + 1 (high) of each byte to bit 4:
                // 16-bit shifts, whatever crosses into a neighbouring byte lands outside the mask.
                let (lo, hi) = (
                    [_mm512_slli_epi16::<4>(h), _mm512_slli_epi16::<2>(h), h, _mm512_srli_epi16::<2>(h)],
                    [_mm512_slli_epi16::<3>(h), _mm512_slli_epi16::<1>(h), _mm512_srli_epi16::<1>(h), _mm512_srli_epi16::<3>(h)],
                );
                for c in 0..4 {
                    w[c] = _mm512_or_si512(w[c], _mm512_and_si512(lo[c], bit4));
                    w[c + 4] = _mm512_or_si512(w[c + 4], _mm512_and_si512(hi[c], bit4));
                }
            }
        } else {
            for (c, wc) in w.iter_mut().enumerate() {
                // SAFETY: chunk c of the block's 512 quant bytes.
                let v = unsafe { _mm512_loadu_si512(q.add(64 * c).cast()) };
                // Without VNNI the signed quants are multiplied (see `block_sum`): unflip.
                *wc = if VNNI { v } else { _mm512_xor_si512(v, _mm512_set1_epi8(i8::MIN)) };
            }
        }
        w
    }
}

avx512_fn! {
    /// `start + Σ_g w[g]·a[g]` per lane, `a[g]` the activation word `g` at `a`
    /// broadcast; in two chains when `SPLIT` (few columns: the chain's latency
    /// would otherwise bound the loop) or when the high nibbles are in place
    /// (their chain is shifted down before the two are added).
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ, and AVX512_VNNI when `VNNI`; `a` points to 32 bytes.
    #[inline]
    unsafe fn block_sum<R: RepackType, const VNNI: bool, const SPLIT: bool>(
        start: __m512i,
        w: &[__m512i; 8],
        a: *const u8,
    ) -> __m512i {
        if R::NIBBLES && !VNNI {
            // A 4-bit weight pair's product is at most 2·15·128 = 3840, so
            // the block's eight sum in i16 (30720) and widen once: one
            // `vpmaddwd` a block instead of eight, the same integers. A
            // 5-bit pair's, 2·31·128 = 7936, four at a time (31744): two.
            let mut pairs = [_mm512_setzero_si512(); 2];
            for (g, &wg) in w.iter().enumerate() {
                // SAFETY: word g of the block's 32 activation bytes.
                let ag = _mm512_set1_epi32(unsafe { a.add(4 * g).cast::<i32>().read_unaligned() });
                let p = &mut pairs[if R::FIFTH { g / 4 } else { 0 }];
                *p = _mm512_add_epi16(*p, _mm512_maddubs_epi16(wg, ag));
            }
            let ones = _mm512_set1_epi16(1);
            let sum = _mm512_add_epi32(start, _mm512_madd_epi16(pairs[0], ones));
            return if R::FIFTH { _mm512_add_epi32(sum, _mm512_madd_epi16(pairs[1], ones)) } else { sum };
        }
        let mut sums = [start, _mm512_setzero_si512()];
        for (g, &wg) in w.iter().enumerate() {
            // SAFETY: word g of the block's 32 activation bytes.
            let ag = _mm512_set1_epi32(unsafe { a.add(4 * g).cast::<i32>().read_unaligned() });
            let chain = if high_in_place::<R, VNNI>() {
                g / 4
            } else if SPLIT {
                g % 2
            } else {
                0
            };
            let s = &mut sums[chain];
            if R::NIBBLES || VNNI {
                // SAFETY: the caller's contract; pairs of 4-bit quants sum to at most 2·15·128
                // (in place, 4·240·128 a lane, only with VNNI: no i16 pair sums).
                *s = unsafe { dot_bytes::<VNNI>(*s, wg, ag) };
            } else {
                // Signed × signed as |w| × (a with w's sign): pairs sum to at most 2·128·127.
                let negative = _mm512_movepi8_mask(wg);
                let signed = _mm512_mask_sub_epi8(ag, negative, _mm512_setzero_si512(), ag);
                // SAFETY: the caller's contract.
                *s = unsafe { dot_bytes::<false>(*s, _mm512_abs_epi8(wg), signed) };
            }
        }
        if high_in_place::<R, VNNI>() {
            // The high chain is 16 times its sum, exactly: the shift is exact.
            _mm512_add_epi32(sums[0], _mm512_srai_epi32::<4>(sums[1]))
        } else if SPLIT {
            _mm512_add_epi32(sums[0], sums[1])
        } else {
            sums[0]
        }
    }
}

/// Reads the 4-byte word at `p`.
///
/// # Safety
/// `p` points to 4 readable bytes.
#[inline(always)]
unsafe fn word(p: *const u8) -> [u8; 4] {
    // SAFETY: the caller's contract.
    unsafe { p.cast::<[u8; 4]>().read_unaligned() }
}

avx512_fn! {
    /// Group `g` of `job` times its columns `c0 .. c0 + C`, every block.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ, and AVX512_VNNI when `VNNI`; the job's contract;
    /// `c0 + C` within the job's columns.
    #[inline]
    unsafe fn group_product<R: RepackType, const C: usize, const VNNI: bool>(
        job: &Job,
        g: usize,
        c0: usize,
        prefetch: bool,
    ) {
        let layout: &GroupLayout = &job.layout;
        let cl: &ColumnLayout = &job.col_layout;
        let group = job.data.wrapping_add(g * layout.bytes);
        // The matrix's last byte: past it lie lines nobody here wants. (Within
        // the matrix, lines of a task another thread runs are fetched from
        // this core's cache, not from memory again.)
        let end = job.data.wrapping_add(groups(job.m) * layout.bytes);
        let cols: [*const u8; C] = std::array::from_fn(|j| job.col(c0 + j));
        let uses_start = R::OFFSET != 0 && (R::NIBBLES || VNNI);
        let mut acc = [_mm512_setzero_ps(); C];
        let mut acc_m = [_mm512_setzero_ps(); C];
        // Many columns: their mins' terms wait for a second loop over the
        // blocks, so that the first keeps the weights and the columns'
        // sums in registers (8 columns with both sums spilled to the stack
        // every block).
        let mins_inline = R::HAS_MIN && C <= MINS_INLINE_MAX_COLS;
        for b in 0..layout.nb {
            let sc = group.wrapping_add(b * layout.scale_stride);
            // SAFETY: block b's scales and quants lie inside the
            // group, its activation words, scale and aux word inside each
            // column (the job's contract).
            unsafe {
                let dw = _mm512_cvtph_ps(_mm256_loadu_si256(sc.cast()));
                let mw = if mins_inline { _mm512_cvtph_ps(_mm256_loadu_si256(sc.add(32).cast())) } else { dw };
                let q = group.add(layout.quants_at + b * layout.quant_stride);
                if prefetch {
                    prefetch_l2(q.wrapping_add(PREFETCH), layout.quant_stride, end);
                }
                let w = weights::<R, VNNI>(q);
                for j in 0..C {
                    let col = cols[j];
                    let aux = word(col.add(cl.aux_at + 4 * b));
                    let start =
                        if uses_start { _mm512_set1_epi32(i32::from_le_bytes(aux)) } else { _mm512_setzero_si512() };
                    let isum = if C < 4 {
                        block_sum::<R, VNNI, true>(start, &w, col.add(32 * b))
                    } else {
                        block_sum::<R, VNNI, false>(start, &w, col.add(32 * b))
                    };
                    let da = _mm512_set1_ps(f32::from_le_bytes(word(col.add(cl.d_at + 4 * b))));
                    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, da), acc[j]);
                    if mins_inline {
                        acc_m[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(f32::from_le_bytes(aux)), acc_m[j]);
                    }
                }
            }
        }
        if R::HAS_MIN && !mins_inline {
            // The mins' terms, block by block as in the loop above (the same
            // multiply-adds in the same order: the same bits), from the
            // scale area the loop just read.
            for b in 0..layout.nb {
                let sc = group.wrapping_add(b * layout.scale_stride);
                // SAFETY: block b's mins lie inside the group, its aux word inside each column.
                unsafe {
                    let mw = _mm512_cvtph_ps(_mm256_loadu_si256(sc.add(32).cast()));
                    for j in 0..C {
                        let aux = word(cols[j].add(cl.aux_at + 4 * b));
                        acc_m[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(f32::from_le_bytes(aux)), acc_m[j]);
                    }
                }
            }
        }
        let rows = job.rows_of(g);
        let mask: __mmask16 = if rows >= GROUP_ROWS { !0 } else { (1 << rows) - 1 };
        for j in 0..C {
            let v = if R::HAS_MIN { _mm512_add_ps(acc[j], acc_m[j]) } else { acc[j] };
            // SAFETY: rows 16g .. 16g + rows of column c0 + j are inside dst and this job's.
            unsafe { _mm512_mask_storeu_ps(job.out(g, c0 + j), mask, v) };
        }
    }
}

/// Defines the entry points of one path: `$group::<R, C>` compiles
/// [`group_product`] for `C` columns with the path's features (so that its
/// byte products, `vpdpbusd` included, are inlined instructions), and `$run`
/// runs a job with them.
macro_rules! entry_points {
    ($feature_fn:ident, $vnni:literal, $group:ident, $run:ident, $what:literal) => {
        $feature_fn! {
            #[doc = concat!("[`group_product`] with ", $what, ".")]
            ///
            /// # Safety
            /// As [`group_product`].
            unsafe fn $group<R: RepackType, const C: usize>(job: &Job, g: usize, c0: usize, prefetch: bool) {
                // SAFETY: this function enables the features the body needs.
                unsafe { group_product::<R, C, $vnni>(job, g, c0, prefetch) }
            }
        }

        #[doc = concat!("Runs `job` with ", $what, ".")]
        ///
        /// # Safety
        /// As [`Job`] says, and the CPU has the path's features.
        pub(crate) unsafe fn $run<R: RepackType>(job: &Job) {
            let pass: [unsafe fn(&Job, usize, usize, bool); MAX_COLS] = [
                $group::<R, 1>,
                $group::<R, 2>,
                $group::<R, 3>,
                $group::<R, 4>,
                $group::<R, 5>,
                $group::<R, 6>,
                $group::<R, 7>,
                $group::<R, 8>,
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
    "byte products by `vpmaddubsw` + `vpmaddwd` (AVX-512 F/BW/VL/DQ)"
);
entry_points!(
    avx512_vnni_fn,
    true,
    group_vnni,
    run_vnni,
    "byte products by `vpdpbusd` (AVX-512 F/BW/VL/DQ and AVX512_VNNI)"
);
