//! The AVX2 micro-kernel of the tiled quantized mul_mat: `R` unpacked weight
//! rows against `C` activation rows, all `R·C` dot products at once, so each
//! 32-value chunk of weights is loaded once per `C` columns and each chunk of
//! activations once per `R` rows.
//!
//! Weights arrive unpacked (see `weight::WeightType::unpack`): signed bytes
//! and one f32 scale per 16 values; activations are the partner blocks with
//! one f32 scale per 32 values precomputed. Per chunk and pair the work is
//! sign, `vpmaddubsw`, `vpmaddwd`, convert, scale and fused add.

use std::arch::x86_64::*;

use super::dot_avx2::hsum_ps;
use super::weight::ActBlock;
use crate::isa::avx2_fn;

/// Pointers to one unpacked weight row: `q` (k bytes), `scale16` (k/16 floats).
#[derive(Clone, Copy)]
pub(crate) struct WRow {
    pub q: *const i8,
    pub scale16: *const f32,
}

/// Pointers to one activation row: its partner blocks and its chunk scales (k/32 floats).
#[derive(Clone, Copy)]
pub(crate) struct ARow {
    pub blocks: *const u8,
    pub scale32: *const f32,
}

avx2_fn! {
    /// Computes `out[r][c] = Σ_chunks scale·(w_r · a_c)` over `nchunks` 32-value chunks.
    ///
    /// `UNSIGNED`: every weight byte is in 0..=127 (Q4_1, Q5_1), so it is
    /// `vpmaddubsw`'s unsigned operand as it is, and the two sign
    /// instructions per (row, chunk) and per (row, column, chunk) that make a
    /// signed × signed product fit it are skipped.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C. Each `w[r]` points to `32·nchunks` bytes
    /// and `2·nchunks` floats, each `a[c]` to `nchunks / A::CHUNKS` blocks of `A`
    /// and `nchunks` floats; no weight byte is −128 and no activation quant is
    /// −128 (true of every unpacked type and partner quantizer here); with
    /// `UNSIGNED`, no weight byte is negative either.
    pub(crate) unsafe fn micro<A: ActBlock, const UNSIGNED: bool, const R: usize, const C: usize>(
        nchunks: usize,
        w: &[WRow; R],
        a: &[ARow; C],
    ) -> [[f32; C]; R] {
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let ones = _mm256_set1_epi16(1);
        let spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        let block_bytes = size_of::<A>();
        for j in 0..nchunks {
            let a_off = (j / A::CHUNKS) * block_bytes + A::QS_OFFSET + (j % A::CHUNKS) * 32;
            let mut wv = [_mm256_setzero_si256(); R];
            let mut wabs = [_mm256_setzero_si256(); R];
            let mut ws = [_mm256_setzero_ps(); R];
            for r in 0..R {
                // SAFETY: chunk j of row r lies within the 32·nchunks bytes and
                // 2·nchunks floats the caller guarantees.
                unsafe {
                    wv[r] = _mm256_loadu_si256(w[r].q.add(32 * j).cast());
                    let pair = _mm_castpd_ps(_mm_load_sd(w[r].scale16.add(2 * j).cast()));
                    ws[r] = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(pair), spread);
                }
                if !UNSIGNED {
                    wabs[r] = _mm256_sign_epi8(wv[r], wv[r]);
                }
            }
            for c in 0..C {
                // SAFETY: chunk j of column c lies within the caller's blocks and scales.
                let (av, sa) = unsafe {
                    (_mm256_loadu_si256(a[c].blocks.add(a_off).cast()), _mm256_broadcast_ss(&*a[c].scale32.add(j)))
                };
                for r in 0..R {
                    let p = if UNSIGNED {
                        _mm256_maddubs_epi16(wv[r], av)
                    } else {
                        _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(av, wv[r]))
                    };
                    let f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
                    acc[r][c] = _mm256_fmadd_ps(f, _mm256_mul_ps(ws[r], sa), acc[r][c]);
                }
            }
        }
        let mut out = [[0f32; C]; R];
        for r in 0..R {
            for c in 0..C {
                out[r][c] = hsum_ps(acc[r][c]);
            }
        }
        out
    }
}

/// Pointers to one unpacked K-quant row in the integer form: `q` (k unsigned
/// bytes), `sc` (16 i16 per 32-value chunk), `d` (one f32 per super-block).
#[derive(Clone, Copy)]
pub(crate) struct KRow {
    pub q: *const u8,
    pub sc: *const i16,
    pub d: *const f32,
}

avx2_fn! {
    /// Computes `out[r][c] = Σ_blocks d_r·d_c·Σ_chunks sc·(q_r · a_c)` over
    /// `nblocks` super-blocks, keeping exact i32 sums within a super-block (the
    /// group scales applied by `vpmaddwd`) and converting once per super-block.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C. Each `w[r]` points to `256·nblocks` bytes,
    /// `128·nblocks` i16 and `nblocks` f32; each `a[c]` to `nblocks` Q8_K blocks.
    /// Quants are at most 63 (so `vpmaddubsw` cannot saturate against |a| ≤ 127)
    /// and |sc| ≤ 128.
    pub(crate) unsafe fn micro_k<const R: usize, const C: usize>(
        nblocks: usize,
        w: &[KRow; R],
        a: &[*const gantry_engine::quant::BlockQ8K; C],
    ) -> [[f32; C]; R] {
        let mut accf = [[_mm256_setzero_ps(); C]; R];
        let mut acci = [[_mm256_setzero_si256(); C]; R];
        // One flat loop over the chunks (a runtime trip count) rather than 8
        // chunks nested in each super-block: fully unrolled, the nested form
        // needed far more registers than AVX2 has and spilled in the hot loop.
        for j in 0..8 * nblocks {
            let (b, chunk) = (j / 8, j % 8);
            let mut wv = [_mm256_setzero_si256(); R];
            let mut sv = [_mm256_setzero_si256(); R];
            for r in 0..R {
                // SAFETY: within the row's 256·nblocks bytes and 128·nblocks i16.
                unsafe {
                    wv[r] = _mm256_loadu_si256(w[r].q.add(32 * j).cast());
                    sv[r] = _mm256_loadu_si256(w[r].sc.add(16 * j).cast());
                }
            }
            for c in 0..C {
                // SAFETY: block b of column c exists; its quants are 256 bytes.
                let av = unsafe { _mm256_loadu_si256((*a[c].add(b)).qs.as_ptr().add(32 * chunk).cast()) };
                for r in 0..R {
                    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[r], av), sv[r]);
                    acci[r][c] = _mm256_add_epi32(acci[r][c], p);
                }
            }
            if chunk == 7 {
                for r in 0..R {
                    // SAFETY: super-block scale b of row r exists.
                    let dr = unsafe { *w[r].d.add(b) };
                    for c in 0..C {
                        // SAFETY: block b of column c exists.
                        let dc = unsafe { (*a[c].add(b)).d };
                        let f = _mm256_cvtepi32_ps(acci[r][c]);
                        accf[r][c] = _mm256_fmadd_ps(f, _mm256_set1_ps(dr * dc), accf[r][c]);
                        acci[r][c] = _mm256_setzero_si256();
                    }
                }
            }
        }
        let mut out = [[0f32; C]; R];
        for r in 0..R {
            for c in 0..C {
                out[r][c] = hsum_ps(accf[r][c]);
            }
        }
        out
    }
}

avx2_fn! {
    /// Computes `out[r][c] = Σ_g mins_r[g] · sums_c[g]` over `n` values (a
    /// multiple of 8): the correction of the types with mins (`x = d·q + m`),
    /// whose weights' mins meet the activations' group sums.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `n` is a multiple of 8 and every pointer
    /// addresses `n` floats.
    pub(crate) unsafe fn mins_dot<const R: usize, const C: usize>(
        n: usize,
        mins: &[*const f32; R],
        sums: &[*const f32; C],
    ) -> [[f32; C]; R] {
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        for g in (0..n).step_by(8) {
            // SAFETY: g + 8 ≤ n, within every row's and column's n floats.
            let mv: [__m256; R] = std::array::from_fn(|r| unsafe { _mm256_loadu_ps(mins[r].add(g)) });
            for c in 0..C {
                // SAFETY: as above.
                let sv = unsafe { _mm256_loadu_ps(sums[c].add(g)) };
                for r in 0..R {
                    acc[r][c] = _mm256_fmadd_ps(mv[r], sv, acc[r][c]);
                }
            }
        }
        let mut out = [[0f32; C]; R];
        for r in 0..R {
            for c in 0..C {
                out[r][c] = hsum_ps(acc[r][c]);
            }
        }
        out
    }
}
