//! AVX-512 dot products of several weight rows with one activation row, for
//! the 32-value block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): the batch-1
//! matrix-vector product of token generation.
//!
//! The kernel of [`super::rows_avx2`] (see there why it beats one row at a
//! time) with two blocks per 512-bit register: block `b` in the low 256 bits,
//! `b + 1` in the high. An activation pair is prepared once for all rows;
//! the offset types (Q4_0, Q5_0) multiply unsigned quants and start each
//! row's sum at −offset·Σq', formed once per activation pair; the headers of
//! two weight blocks are converted by one `vcvtph2ps` and multiplied by the
//! activations' in one `vmulps`. An odd last block is paired with itself
//! against an all-zero activation block, which adds exactly nothing.
//!
//! One body, generic over `VNNI` (the byte products: `vpdpbusd` or
//! `vpmaddubsw` + `vpmaddwd`, see [`super::dot_avx512`]), and two entry
//! points, [`dot_rows_plain`] and [`dot_rows_vnni`].

use std::arch::x86_64::*;

use bytemuck::Zeroable;
use gantry_engine::quant::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, F16Bits};

use super::dot_avx512::{bytes_pair, dot_bytes, dot_i8, f16x4, five_bit_pair, nibbles_pair, spread};
use super::rows_avx2::{RowPrefetch, STEP};
use crate::isa::{avx512_fn, avx512_vnni_fn};

// The pairs of blocks must line up with the prefetch rounds.
const _: () = assert!(STEP.is_multiple_of(2));

/// A pair of activation blocks, prepared once for every weight row.
#[derive(Clone, Copy)]
pub(crate) struct Act {
    /// The 64 quants.
    q: __m512i,
    /// The headers as f32: `d` of both blocks in lanes 0 and 1, `s` (Q8_1) in lanes 2 and 3.
    h: __m128,
    /// Per i32 lane (4 values each), minus the weights' offset times the
    /// lane's sum of quants (offset types only): where each row's sum starts.
    start: __m512i,
}

/// A 32-value weight block that [`dot_rows_plain`] / [`dot_rows_vnni`] multiply.
pub(crate) trait RowPair: Sized {
    /// Its dot partner.
    type Y: Zeroable;
    /// Whether the block has a min (`x = d·q + m`), whose `m·s` terms come in
    /// lanes 2 and 3 of the header products.
    const HAS_MIN: bool;

    /// Prepares two activation blocks for this weight type.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ with AVX2/FMA/F16C; AVX512_VNNI when `VNNI`.
    unsafe fn act<const VNNI: bool>(y: [&Self::Y; 2]) -> Act;

    /// `Σ q·q'` of two blocks and `a` per i32 lane (lanes 0..8 block 0,
    /// 8..16 block 1), and the header products: `d·d'` of both blocks in
    /// lanes 0 and 1, `m·s` in lanes 2 and 3 (when [`RowPair::HAS_MIN`]).
    ///
    /// # Safety
    /// As [`RowPair::act`].
    unsafe fn dot<const VNNI: bool>(x: [&Self; 2], a: &Act) -> (__m512i, __m128);
}

avx512_fn! {
    /// `−2^SHIFT · Σq` per i32 lane of `q` (4 values each).
    ///
    /// # Safety
    /// As [`RowPair::act`].
    #[inline]
    unsafe fn minus_lane_sums<const SHIFT: u32, const VNNI: bool>(q: __m512i) -> __m512i {
        // SAFETY: the caller's contract; pair sums 2·1·128.
        let sums = unsafe { dot_bytes::<VNNI>(_mm512_setzero_si512(), _mm512_set1_epi8(1), q) };
        _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<SHIFT>(sums))
    }
}

/// Zero f16.
const Z: F16Bits = F16Bits([0, 0]);

avx512_fn! {
    /// Two Q8_0 activation blocks, for weights without an offset (sums start at 0).
    #[inline]
    fn act_q8_0(y: [&BlockQ8_0; 2]) -> Act {
        Act { q: bytes_pair(&y[0].qs, &y[1].qs), h: f16x4([y[0].d, y[1].d, Z, Z]), start: _mm512_setzero_si512() }
    }
}

avx512_fn! {
    /// Two Q8_0 activation blocks, for weights stored as `q + 2^SHIFT` (Q4_0: 3,
    /// Q5_0: 4): each row's sum starts at `−2^SHIFT · Σq'`.
    ///
    /// # Safety
    /// As [`RowPair::act`].
    #[inline]
    unsafe fn act_q8_0_offset<const SHIFT: u32, const VNNI: bool>(y: [&BlockQ8_0; 2]) -> Act {
        let a = act_q8_0(y);
        // SAFETY: the caller's contract.
        Act { start: unsafe { minus_lane_sums::<SHIFT, VNNI>(a.q) }, ..a }
    }
}

avx512_fn! {
    /// Two Q8_1 activation blocks (`d` and `s` of both in the header).
    #[inline]
    fn act_q8_1(y: [&BlockQ8_1; 2]) -> Act {
        Act {
            q: bytes_pair(&y[0].qs, &y[1].qs),
            h: f16x4([y[0].d, y[1].d, y[0].s, y[1].s]),
            start: _mm512_setzero_si512(),
        }
    }
}

avx512_fn! {
    /// The header products of two weight blocks with `a`: `d·d'` in lanes 0
    /// and 1, and `m·s` in lanes 2 and 3 when the blocks have mins `m`.
    #[inline]
    fn header_products(d: [F16Bits; 2], m: Option<[F16Bits; 2]>, a: &Act) -> __m128 {
        let [m0, m1] = m.unwrap_or([Z, Z]);
        _mm_mul_ps(f16x4([d[0], d[1], m0, m1]), a.h)
    }
}

impl RowPair for BlockQ4_0 {
    type Y = BlockQ8_0;
    const HAS_MIN: bool = false;
    avx512_fn! {
        #[inline]
        unsafe fn act<const VNNI: bool>(y: [&BlockQ8_0; 2]) -> Act {
            // SAFETY: the caller's contract.
            unsafe { act_q8_0_offset::<3, VNNI>(y) }
        }
    }
    avx512_fn! {
        #[inline]
        unsafe fn dot<const VNNI: bool>(x: [&Self; 2], a: &Act) -> (__m512i, __m128) {
            let u = nibbles_pair(&x[0].qs, &x[1].qs);
            // SAFETY: the caller's contract; pair sums 2·15·128.
            let s = unsafe { dot_bytes::<VNNI>(a.start, u, a.q) };
            (s, header_products([x[0].d, x[1].d], None, a))
        }
    }
}

impl RowPair for BlockQ5_0 {
    type Y = BlockQ8_0;
    const HAS_MIN: bool = false;
    avx512_fn! {
        #[inline]
        unsafe fn act<const VNNI: bool>(y: [&BlockQ8_0; 2]) -> Act {
            // SAFETY: the caller's contract.
            unsafe { act_q8_0_offset::<4, VNNI>(y) }
        }
    }
    avx512_fn! {
        #[inline]
        unsafe fn dot<const VNNI: bool>(x: [&Self; 2], a: &Act) -> (__m512i, __m128) {
            let u = five_bit_pair([&x[0].qs, &x[1].qs], [x[0].qh, x[1].qh]);
            // SAFETY: the caller's contract; pair sums 2·31·128.
            let s = unsafe { dot_bytes::<VNNI>(a.start, u, a.q) };
            (s, header_products([x[0].d, x[1].d], None, a))
        }
    }
}

impl RowPair for BlockQ4_1 {
    type Y = BlockQ8_1;
    const HAS_MIN: bool = true;
    avx512_fn! {
        #[inline]
        unsafe fn act<const VNNI: bool>(y: [&BlockQ8_1; 2]) -> Act {
            act_q8_1(y)
        }
    }
    avx512_fn! {
        #[inline]
        unsafe fn dot<const VNNI: bool>(x: [&Self; 2], a: &Act) -> (__m512i, __m128) {
            let u = nibbles_pair(&x[0].qs, &x[1].qs);
            // SAFETY: the caller's contract; pair sums 2·15·128.
            let s = unsafe { dot_bytes::<VNNI>(a.start, u, a.q) };
            (s, header_products([x[0].d, x[1].d], Some([x[0].m, x[1].m]), a))
        }
    }
}

impl RowPair for BlockQ5_1 {
    type Y = BlockQ8_1;
    const HAS_MIN: bool = true;
    avx512_fn! {
        #[inline]
        unsafe fn act<const VNNI: bool>(y: [&BlockQ8_1; 2]) -> Act {
            act_q8_1(y)
        }
    }
    avx512_fn! {
        #[inline]
        unsafe fn dot<const VNNI: bool>(x: [&Self; 2], a: &Act) -> (__m512i, __m128) {
            let u = five_bit_pair([&x[0].qs, &x[1].qs], [x[0].qh, x[1].qh]);
            // SAFETY: the caller's contract; pair sums 2·31·128.
            let s = unsafe { dot_bytes::<VNNI>(a.start, u, a.q) };
            (s, header_products([x[0].d, x[1].d], Some([x[0].m, x[1].m]), a))
        }
    }
}

impl RowPair for BlockQ8_0 {
    type Y = BlockQ8_0;
    const HAS_MIN: bool = false;
    avx512_fn! {
        #[inline]
        unsafe fn act<const VNNI: bool>(y: [&BlockQ8_0; 2]) -> Act {
            act_q8_0(y)
        }
    }
    avx512_fn! {
        #[inline]
        unsafe fn dot<const VNNI: bool>(x: [&Self; 2], a: &Act) -> (__m512i, __m128) {
            let qx = bytes_pair(&x[0].qs, &x[1].qs);
            // SAFETY: the caller's contract.
            let s = unsafe { dot_i8::<VNNI>(qx, a.q) };
            (s, header_products([x[0].d, x[1].d], None, a))
        }
    }
}

avx512_fn! {
    /// Adds blocks `b[0]` and `b[1]` of every row, against `a`, to the accumulators.
    ///
    /// # Safety
    /// As [`RowPair::act`].
    #[inline]
    unsafe fn accumulate<B: RowPair, const R: usize, const VNNI: bool>(
        x: &[&[B]; R],
        a: &Act,
        b: [usize; 2],
        acc: &mut [__m512; R],
        mins: &mut [__m128; R],
    ) {
        for r in 0..R {
            // SAFETY: the caller's contract.
            let (s, h) = unsafe { B::dot::<VNNI>([&x[r][b[0]], &x[r][b[1]]], a) };
            acc[r] = _mm512_fmadd_ps(spread(h, 0, 1), _mm512_cvtepi32_ps(s), acc[r]);
            if B::HAS_MIN {
                mins[r] = _mm_add_ps(mins[r], h);
            }
        }
    }
}

avx512_fn! {
    /// `[row r · y for r < R]`, each row of `x` and `y` cut to the blocks they all hold.
    ///
    /// # Safety
    /// As [`RowPair::act`].
    #[inline]
    unsafe fn dot_rows<B: RowPair, const R: usize, const VNNI: bool>(x: [&[B]; R], y: &[B::Y]) -> [f32; R] {
        let nb = x.iter().fold(y.len(), |n, r| n.min(r.len()));
        let x: [&[B]; R] = x.map(|r| &r[..nb]);
        let y = &y[..nb];
        let mut acc = [_mm512_setzero_ps(); R];
        let mut mins = [_mm_setzero_ps(); R];
        let prefetch = RowPrefetch::new::<B>(nb, R);
        let zero = B::Y::zeroed();
        // One call site each of `act` and `accumulate`, so that both inline here
        // (a copy left out of line would be compiled without the entry point's
        // AVX512_VNNI and call `vpdpbusd` through a function).
        for b in (0..nb).step_by(2) {
            if b % STEP == 0 {
                prefetch.run(&x, b);
            }
            // An odd last block is paired with itself against a zero activation block.
            let (y1, b1) = if b + 1 < nb { (&y[b + 1], b + 1) } else { (&zero, b) };
            // SAFETY: the caller's contract (for both calls).
            unsafe {
                let a = B::act::<VNNI>([&y[b], y1]);
                accumulate::<B, R, VNNI>(&x, &a, [b, b1], &mut acc, &mut mins);
            }
        }
        std::array::from_fn(|r| {
            let min_term = if B::HAS_MIN {
                let m = _mm_movehl_ps(mins[r], mins[r]);
                _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)))
            } else {
                0.0
            };
            _mm512_reduce_add_ps(acc[r]) + min_term
        })
    }
}

avx512_fn! {
    /// [`dot_rows`] with byte products by `vpmaddubsw` + `vpmaddwd` (AVX-512 F/BW/VL/DQ).
    pub(crate) fn dot_rows_plain<B: RowPair, const R: usize>(x: [&[B]; R], y: &[B::Y]) -> [f32; R] {
        // SAFETY: this function enables the features the body needs without VNNI.
        unsafe { dot_rows::<B, R, false>(x, y) }
    }
}

avx512_vnni_fn! {
    /// [`dot_rows`] with byte products by `vpdpbusd` (AVX-512 F/BW/VL/DQ and AVX512_VNNI).
    pub(crate) fn dot_rows_vnni<B: RowPair, const R: usize>(x: [&[B]; R], y: &[B::Y]) -> [f32; R] {
        // SAFETY: this function enables every feature the body needs with VNNI.
        unsafe { dot_rows::<B, R, true>(x, y) }
    }
}
