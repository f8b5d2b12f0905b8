//! The AVX2 bodies of the dots and the F16 axpy, written with intrinsics
//! where the auto-vectorizer does not produce full-width code: widening
//! loads of 8 elements (F32, F16 by F16C, BF16 by a shift), then FMA.

use std::arch::x86_64::*;

use half::{bf16, f16};

use crate::isa::avx2_fn;

/// 8 floats at `p + i`.
///
/// # Safety
/// AVX available; 8 elements readable at `p + i`.
#[inline(always)]
pub unsafe fn load_f32(p: *const f32, i: usize) -> __m256 {
    // SAFETY: the caller's guarantee.
    unsafe { _mm256_loadu_ps(p.add(i)) }
}

/// 8 bfloat16 values at `p + i`, widened (a bfloat16 is the top half of an f32).
///
/// # Safety
/// AVX2 available; 8 elements readable at `p + i`.
#[inline(always)]
pub unsafe fn load_bf16(p: *const bf16, i: usize) -> __m256 {
    // SAFETY: the caller's guarantee.
    unsafe {
        let h = _mm_loadu_si128(p.add(i) as *const __m128i);
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
    }
}

/// 8 halves at `p + i`, converted.
///
/// # Safety
/// F16C available; 8 elements readable at `p + i`.
#[inline(always)]
pub unsafe fn load_f16(p: *const f16, i: usize) -> __m256 {
    // SAFETY: the caller's guarantee.
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.add(i) as *const __m128i)) }
}

/// Sums the 8 lanes of `v`.
#[inline(always)]
fn hsum(v: __m256) -> f32 {
    // SAFETY: called only from functions compiled with AVX.
    unsafe {
        let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)))
    }
}

avx2_fn! {
    /// Four dot products of `a` (widened by `load`) with `cols`, one
    /// accumulator each, `a` loaded once per 8 elements.
    ///
    /// # Safety
    /// AVX2, FMA (and F16C when `load` needs it) available; every column
    /// holds at least `a.len()` elements.
    pub unsafe fn dot4<T: Copy + Into<f32>>(
        a: &[T],
        cols: [&[f32]; 4],
        load: impl Fn(*const T, usize) -> __m256,
    ) -> [f32; 4] {
        let n = cols.iter().fold(a.len(), |n, c| n.min(c.len()));
        let pa = a.as_ptr();
        let pc = cols.map(|c| c.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        // SAFETY: each load reads 8 elements at `i` with `i + 8 <= n`.
        unsafe {
            while i + 8 <= n {
                let x = load(pa, i);
                for j in 0..4 {
                    acc[j] = _mm256_fmadd_ps(x, _mm256_loadu_ps(pc[j].add(i)), acc[j]);
                }
                i += 8;
            }
        }
        let mut out = acc.map(hsum);
        while i < n {
            let x: f32 = a[i].into();
            for j in 0..4 {
                out[j] += x * cols[j][i];
            }
            i += 1;
        }
        out
    }
}

avx2_fn! {
    /// `y[i] += alpha * x[i]` with `x` widened by `load`.
    ///
    /// # Safety
    /// AVX2, FMA (and F16C when `load` needs it) available; `y.len() == x.len()`.
    pub unsafe fn axpy<T: Copy + Into<f32>>(
        y: &mut [f32],
        alpha: f32,
        x: &[T],
        load: impl Fn(*const T, usize) -> __m256,
    ) {
        let n = y.len().min(x.len());
        let (py, px) = (y.as_mut_ptr(), x.as_ptr());
        let a = _mm256_set1_ps(alpha);
        let mut i = 0;
        // SAFETY: each access covers 8 elements at `i` with `i + 8 <= n`.
        unsafe {
            while i + 8 <= n {
                _mm256_storeu_ps(py.add(i), _mm256_fmadd_ps(a, load(px, i), _mm256_loadu_ps(py.add(i))));
                i += 8;
            }
        }
        while i < n {
            y[i] += alpha * x[i].into();
            i += 1;
        }
    }
}

avx2_fn! {
    /// `sum(a[i] * b[i])` with `a` widened by `load`, 4 accumulators of 8.
    ///
    /// # Safety
    /// AVX2, FMA (and F16C when `load` needs it) available; `a.len() == b.len()`.
    pub unsafe fn dot<T: Copy + Into<f32>>(a: &[T], b: &[f32], load: impl Fn(*const T, usize) -> __m256) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        // SAFETY: each load reads 8 elements at `i + 8k` with `i + 32 <= n`
        // (or `i + 8 <= n` in the second loop), inside both slices.
        unsafe {
            while i + 32 <= n {
                for (k, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm256_fmadd_ps(load(pa, i + 8 * k), _mm256_loadu_ps(pb.add(i + 8 * k)), *acc);
                }
                i += 32;
            }
            while i + 8 <= n {
                acc[0] = _mm256_fmadd_ps(load(pa, i), _mm256_loadu_ps(pb.add(i)), acc[0]);
                i += 8;
            }
        }
        let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let mut total = hsum(s);
        while i < n {
            total += a[i].into() * b[i];
            i += 1;
        }
        total
    }
}

avx2_fn! {
    /// [`dot`] of `a` with each of `bs`, `a` loaded (and widened) once per
    /// 8 elements for all of them; each result is, operation for operation,
    /// the one [`dot`] gives (the same four accumulators, the same order).
    ///
    /// # Safety
    /// AVX2, FMA (and F16C when `load` needs it) available; every `b` holds
    /// at least `a.len()` elements.
    pub unsafe fn dot_each<T: Copy + Into<f32>, const R: usize>(
        a: &[T],
        bs: [&[f32]; R],
        load: impl Fn(*const T, usize) -> __m256,
    ) -> [f32; R] {
        let n = bs.iter().fold(a.len(), |n, b| n.min(b.len()));
        let pa = a.as_ptr();
        let pb = bs.map(|b| b.as_ptr());
        let mut acc = [[_mm256_setzero_ps(); 4]; R];
        let mut i = 0;
        // SAFETY: each load reads 8 elements at `i + 8k` with `i + 32 <= n`
        // (or `i + 8 <= n` in the second loop), inside every slice.
        unsafe {
            while i + 32 <= n {
                for k in 0..4 {
                    let x = load(pa, i + 8 * k);
                    for r in 0..R {
                        acc[r][k] = _mm256_fmadd_ps(x, _mm256_loadu_ps(pb[r].add(i + 8 * k)), acc[r][k]);
                    }
                }
                i += 32;
            }
            while i + 8 <= n {
                let x = load(pa, i);
                for r in 0..R {
                    acc[r][0] = _mm256_fmadd_ps(x, _mm256_loadu_ps(pb[r].add(i)), acc[r][0]);
                }
                i += 8;
            }
        }
        let mut out = [0f32; R];
        for r in 0..R {
            let s = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]), _mm256_add_ps(acc[r][2], acc[r][3]));
            out[r] = hsum(s);
        }
        while i < n {
            let x: f32 = a[i].into();
            for r in 0..R {
                out[r] += x * bs[r][i];
            }
            i += 1;
        }
        out
    }
}

avx2_fn! {
    /// [`axpy`] into each of `ys` with its own `alpha`, `x` loaded (and
    /// widened) once per 8 elements for all of them; each `y` ends as
    /// [`axpy`] leaves it.
    ///
    /// # Safety
    /// AVX2, FMA (and F16C when `load` needs it) available; every `y` holds
    /// `x.len()` elements.
    pub unsafe fn axpy_each<T: Copy + Into<f32>, const R: usize>(
        ys: [&mut [f32]; R],
        alphas: [f32; R],
        x: &[T],
        load: impl Fn(*const T, usize) -> __m256,
    ) {
        let n = ys.iter().fold(x.len(), |n, y| n.min(y.len()));
        let px = x.as_ptr();
        let py = ys.map(|y| y.as_mut_ptr());
        let a = alphas.map(|alpha| _mm256_set1_ps(alpha));
        let mut i = 0;
        // SAFETY: each access covers 8 elements at `i` with `i + 8 <= n`.
        unsafe {
            while i + 8 <= n {
                let v = load(px, i);
                for r in 0..R {
                    _mm256_storeu_ps(py[r].add(i), _mm256_fmadd_ps(a[r], v, _mm256_loadu_ps(py[r].add(i))));
                }
                i += 8;
            }
            while i < n {
                let v: f32 = x[i].into();
                for r in 0..R {
                    *py[r].add(i) += alphas[r] * v;
                }
                i += 1;
            }
        }
    }
}
