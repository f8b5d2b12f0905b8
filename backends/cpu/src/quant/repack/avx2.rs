//! AVX2 kernels of the repacked layout: [`super::avx512`]'s arithmetic on
//! 256-bit registers, a group's 16 rows as two halves of 8 i32 lanes (the
//! low and high 32 bytes of each 64-byte chunk). Byte products are
//! `vpmaddubsw` + `vpmaddwd` (the 4-bit types' eight `vpmaddubsw` of a block
//! summed in i16 and widened once); Q8_0's quants are multiplied signed (the
//! sign trick, `vpsignb`), as `vpmaddubsw` could saturate on the unsigned form.
//!
//! With sixteen registers a half keeps up to [`MAX_COLS`] columns' sums and
//! accumulators while each weight register is loaded once per block.

use std::arch::x86_64::*;

use super::avx512::PREFETCH;
use super::layout::{GROUP_ROWS, RepackType, groups};
use super::{HalfPass, Job};
use crate::isa::avx2_fn;
use crate::prefetch::prefetch_l2;

/// Most activation columns one pass over a block of weights serves.
pub(crate) const MAX_COLS: usize = 4;
/// Most columns whose mins' terms (Q4_1) are accumulated in the blocks'
/// loop itself; with more, a second loop adds them, so that the first
/// keeps its sums in the sixteen registers.
const MINS_INLINE_MAX_COLS: usize = 2;
/// Rows per half group: the i32 lanes of one register.
const HALF: usize = GROUP_ROWS / 2;

/// Reads the 4-byte word at `p`.
///
/// # Safety
/// `p` points to 4 readable bytes.
#[inline(always)]
unsafe fn word(p: *const u8) -> [u8; 4] {
    // SAFETY: the caller's contract.
    unsafe { p.cast::<[u8; 4]>().read_unaligned() }
}

avx2_fn! {
    /// Weight register `g` of one block's half: its 8 rows' values `4g .. 4g + 4`
    /// (Q8_0: signed), from the half's first quant byte `q`.
    ///
    /// # Safety
    /// AVX2; `q` points into a block's quant area at the half's offset.
    #[inline]
    unsafe fn weight<R: RepackType>(q: *const u8, g: usize) -> __m256i {
        if R::NIBBLES {
            // SAFETY: the half of chunk g % 4 (32 of its 64 bytes).
            let v = unsafe { _mm256_loadu_si256(q.add(64 * (g % 4)).cast()) };
            let v = if g < 4 { v } else { _mm256_srli_epi16::<4>(v) };
            let w = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
            if !R::FIFTH {
                return w;
            }
            // SAFETY: the half of the block's fifth-bit plane, after its 256 nibble bytes.
            let h = unsafe { _mm256_loadu_si256(q.add(256).cast()) };
            // Bit 2·(g % 4) + g / 4 of each byte to bit 4 (see `super::avx512`).
            let h = match g {
                0 => _mm256_slli_epi16::<4>(h),
                1 => _mm256_slli_epi16::<2>(h),
                2 => h,
                3 => _mm256_srli_epi16::<2>(h),
                4 => _mm256_slli_epi16::<3>(h),
                5 => _mm256_slli_epi16::<1>(h),
                6 => _mm256_srli_epi16::<1>(h),
                _ => _mm256_srli_epi16::<3>(h),
            };
            _mm256_or_si256(w, _mm256_and_si256(h, _mm256_set1_epi8(0x10)))
        } else {
            // SAFETY: the half of chunk g.
            let v = unsafe { _mm256_loadu_si256(q.add(64 * g).cast()) };
            _mm256_xor_si256(v, _mm256_set1_epi8(i8::MIN))
        }
    }
}

avx2_fn! {
    /// Rows `8·half ..` of group `g` of `job` times its columns `c0 .. c0 + C`.
    ///
    /// # Safety
    /// AVX2, FMA, F16C; the job's contract; `c0 + C` within the job's columns.
    #[inline]
    unsafe fn half_product<R: RepackType, const C: usize>(
        job: &Job,
        g: usize,
        half: usize,
        c0: usize,
        prefetch: bool,
    ) {
        let layout = &job.layout;
        let cl = &job.col_layout;
        let group = job.data.wrapping_add(g * layout.bytes);
        // As on AVX-512: into L2, 16 KiB ahead, up to the matrix's end.
        let end = job.data.wrapping_add(groups(job.m) * layout.bytes);
        let cols: [*const u8; C] = std::array::from_fn(|j| job.col(c0 + j));
        // Q4_0's blocks start from `−8·Σa` (see `layout`); Q8_0's signed
        // products and Q4_1's unsigned quants start from zero.
        let uses_start = R::OFFSET != 0 && R::NIBBLES;
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); C];
        let mut acc_m = [_mm256_setzero_ps(); C];
        let mins_inline = R::HAS_MIN && C <= MINS_INLINE_MAX_COLS;
        for b in 0..layout.nb {
            let sc = group.wrapping_add(b * layout.scale_stride + 2 * HALF * half);
            let q = group.wrapping_add(layout.quants_at + b * layout.quant_stride + 4 * HALF * half);
            if prefetch {
                prefetch_l2(q.wrapping_add(PREFETCH), layout.quant_stride, end);
            }
            // SAFETY: block b's scales and quants lie inside the
            // group, its activation words, scale and aux word inside each
            // column (the job's contract).
            unsafe {
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(sc.cast()));
                let mut isum = [_mm256_setzero_si256(); C];
                if R::NIBBLES {
                    // A 4-bit weight pair's product is at most 2·15·128 = 3840,
                    // so the block's eight sum in i16 (30720) and widen once:
                    // one `vpmaddwd` a block instead of eight, and the same
                    // integers (the same bits).
                    // 5-bit pairs (2·31·128 = 7936) four at a time: widened twice a block.
                    let halves = if R::FIFTH { 2 } else { 1 };
                    for part in 0..halves {
                        let mut pairs = [_mm256_setzero_si256(); C];
                        for gi in (8 / halves * part)..(8 / halves * (part + 1)) {
                            let w = weight::<R>(q, gi);
                            for j in 0..C {
                                let a = _mm256_set1_epi32(i32::from_le_bytes(word(cols[j].add(32 * b + 4 * gi))));
                                pairs[j] = _mm256_add_epi16(pairs[j], _mm256_maddubs_epi16(w, a));
                            }
                        }
                        for j in 0..C {
                            isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(pairs[j], ones));
                        }
                    }
                    for j in 0..C {
                        if uses_start {
                            let start = _mm256_set1_epi32(i32::from_le_bytes(word(cols[j].add(cl.aux_at + 4 * b))));
                            isum[j] = _mm256_add_epi32(isum[j], start);
                        }
                    }
                } else {
                    for gi in 0..8 {
                        let w = weight::<R>(q, gi);
                        let u = _mm256_abs_epi8(w);
                        for j in 0..C {
                            let a = _mm256_set1_epi32(i32::from_le_bytes(word(cols[j].add(32 * b + 4 * gi))));
                            // Signed 8-bit pairs, 2·128·127, fit i16 one at a time only.
                            isum[j] = _mm256_add_epi32(
                                isum[j],
                                _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(a, w)), ones),
                            );
                        }
                    }
                }
                let mw = if mins_inline { _mm256_cvtph_ps(_mm_loadu_si128(sc.add(2 * GROUP_ROWS).cast())) } else { dw };
                for j in 0..C {
                    let da = _mm256_set1_ps(f32::from_le_bytes(word(cols[j].add(cl.d_at + 4 * b))));
                    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, da), acc[j]);
                    if mins_inline {
                        let s = _mm256_set1_ps(f32::from_le_bytes(word(cols[j].add(cl.aux_at + 4 * b))));
                        acc_m[j] = _mm256_fmadd_ps(mw, s, acc_m[j]);
                    }
                }
            }
        }
        if R::HAS_MIN && !mins_inline {
            // The mins' terms, block by block as in the loop above (the same
            // multiply-adds in the same order: the same bits).
            for b in 0..layout.nb {
                let sc = group.wrapping_add(b * layout.scale_stride + 2 * HALF * half);
                // SAFETY: block b's mins lie inside the group, its aux word inside each column.
                unsafe {
                    let mw = _mm256_cvtph_ps(_mm_loadu_si128(sc.add(2 * GROUP_ROWS).cast()));
                    for j in 0..C {
                        let s = _mm256_set1_ps(f32::from_le_bytes(word(cols[j].add(cl.aux_at + 4 * b))));
                        acc_m[j] = _mm256_fmadd_ps(mw, s, acc_m[j]);
                    }
                }
            }
        }
        let rows = job.rows_of(g).saturating_sub(HALF * half).min(HALF);
        for j in 0..C {
            let v = if R::HAS_MIN { _mm256_add_ps(acc[j], acc_m[j]) } else { acc[j] };
            let out = job.out(g, c0 + j).wrapping_add(HALF * half);
            // SAFETY: the half's first `rows` rows of column c0 + j are inside dst and this job's.
            unsafe { store_rows(out, v, rows) };
        }
    }
}

avx2_fn! {
    /// Stores the first `rows` (at most 8) lanes of `v` at `out`: one
    /// column's rows of half a group, the last group's possibly short.
    ///
    /// # Safety
    /// `out .. out + rows` is writable.
    #[inline]
    pub(crate) unsafe fn store_rows(out: *mut f32, v: __m256, rows: usize) {
        if rows == HALF {
            // SAFETY: the caller's contract, with 8 rows.
            unsafe { _mm256_storeu_ps(out, v) };
        } else {
            let mut lanes = [0f32; HALF];
            // SAFETY: `lanes` holds 8 floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), v) };
            for (r, &x) in lanes.iter().enumerate().take(rows) {
                // SAFETY: the caller's contract: row r < rows is writable.
                unsafe { *out.add(r) = x };
            }
        }
    }
}

avx2_fn! {
    /// Every group of `job` times every column, half a group and at most
    /// [`MAX_COLS`] columns at a time (sized evenly).
    ///
    /// # Safety
    /// AVX2, FMA, F16C; as [`Job`] says.
    pub(crate) unsafe fn run<R: RepackType>(job: &Job) {
        let pass: [HalfPass; MAX_COLS] = [
            half_product::<R,
            1>,
            half_product::<R,
            2>,
            half_product::<R,
            3>,
            half_product::<R,
            4>,
        ];
        // SAFETY: the caller's contract.
        unsafe { job.in_half_passes(HALF, pass) }
    }
}
