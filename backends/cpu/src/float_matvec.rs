//! Matrix-vector products with F16 and F32 weights (token generation with
//! unquantized weights): one streaming pass over the weights, rows split over
//! the threads, AVX2/F16C or AVX-512 (16 values per register, masked loads
//! for the row tails) where available.
//!
//! These exist because a general GEMM is built for reuse that a single
//! column does not have; the CPU backend's F32/F16 MUL_MAT (`ops::mul_mat`)
//! routes `N = 1` here. They are dense kernels, not quantized ones, but take
//! the same run-time [`Isa`] paths as the quantized kernels.

use gantry_engine::{Error, Result};
use half::f16;

use crate::Isa;
use crate::jobs::{JobSystem, run_tasks};
use crate::parallel::SendPtr;

/// Rows per parallel task.
const ROWS: usize = 32;

/// A weight matrix as the mat-vec reads it: `m` rows of `k` values, row `r`
/// starting at `data[r * row_stride]`.
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a, T> {
    /// The values.
    pub data: &'a [T],
    /// Values per row used by the product.
    pub k: usize,
    /// Number of rows.
    pub m: usize,
    /// Distance between row starts, in values (`>= k`).
    pub row_stride: usize,
}

impl<T> Rows<'_, T> {
    /// Checks that every row lies in `data` and that `x` and `y` are long enough.
    fn check(&self, what: &str, x: usize, y: usize) -> Result<()> {
        let Rows { data, k, m, row_stride } = *self;
        let fits = m == 0
            || (row_stride >= k
                && (m - 1).checked_mul(row_stride).and_then(|s| s.checked_add(k)).is_some_and(|s| s <= data.len()));
        if !fits || x < k || y < m {
            return Err(Error::InvalidOp {
                op: "MUL_MAT",
                reason: format!(
                    "{what} mat-vec: {m} rows of {k} (stride {row_stride}) in {} values, x of {x}, y of {y}",
                    data.len()
                ),
            });
        }
        Ok(())
    }
}

/// `y[r] = Σ_t w[r·row_stride + t]·x[t]` for `r < m`, F32 weights, on the fastest path.
pub fn f32_mat_vec(w: Rows<'_, f32>, x: &[f32], y: &mut [f32], jobs: &dyn JobSystem) -> Result<()> {
    f32_mat_vec_on(Isa::best(), w, x, y, jobs)
}

/// [`f32_mat_vec`] on the path `isa`.
pub fn f32_mat_vec_on(isa: Isa, w: Rows<'_, f32>, x: &[f32], y: &mut [f32], jobs: &dyn JobSystem) -> Result<()> {
    mat_vec_on(isa, w, x, y, jobs)
}

/// `y[r] = Σ_t w[r·row_stride + t]·x[t]` for `r < m`, F16 weights (exact
/// widening to f32, f32 products and sums), on the fastest path.
pub fn f16_mat_vec(w: Rows<'_, f16>, x: &[f32], y: &mut [f32], jobs: &dyn JobSystem) -> Result<()> {
    f16_mat_vec_on(Isa::best(), w, x, y, jobs)
}

/// [`f16_mat_vec`] on the path `isa`.
pub fn f16_mat_vec_on(isa: Isa, w: Rows<'_, f16>, x: &[f32], y: &mut [f32], jobs: &dyn JobSystem) -> Result<()> {
    mat_vec_on(isa, w, x, y, jobs)
}

/// The mat-vec of either element type on the path `isa`.
fn mat_vec_on<T: Elem>(isa: Isa, w: Rows<'_, T>, x: &[f32], y: &mut [f32], jobs: &dyn JobSystem) -> Result<()> {
    w.check(T::NAME, x.len(), y.len())?;
    let x = &x[..w.k];
    mat_vec_rows(
        w,
        y,
        jobs,
        |row| match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx2` is only handed out after checking the CPU.
            Isa::Avx2 => unsafe { avx2::dot_rows::<T, 1>([row], x)[0] },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above (AVX-512 F/BW/VL/DQ checked).
            Isa::Avx512 | Isa::Avx512Vnni => unsafe { avx512::dot_rows::<T, 1>([row], x)[0] },
            Isa::Scalar => row.iter().zip(x).map(|(&a, b)| a.to_f32() * b).sum(),
        },
        |rows| match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 => unsafe { avx2::dot_rows::<T, 4>(rows, x) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx512 | Isa::Avx512Vnni => unsafe { avx512::dot_rows::<T, 4>(rows, x) },
            Isa::Scalar => rows.map(|row| row.iter().zip(x).map(|(&a, b)| a.to_f32() * b).sum()),
        },
    );
    Ok(())
}

/// `y[r] = Σ_t w[r·row_stride + t]·x[t]` for `r < m`: the rows split over
/// the job system in tasks of `ROWS` rows, each task through `dot4` four
/// rows at a time (the rest one by one through `dot`).
fn mat_vec_rows<T: Sync>(
    w: Rows<'_, T>,
    y: &mut [f32],
    jobs: &dyn JobSystem,
    dot: impl Fn(&[T]) -> f32 + Sync,
    dot4: impl Fn([&[T]; 4]) -> [f32; 4] + Sync,
) {
    let Rows { data: w, k, m, row_stride } = w;
    let row = |r: usize| &w[r * row_stride..r * row_stride + k];
    let rows_of = |r0: usize, out: &mut [f32]| {
        let done = out.len() / 4 * 4;
        let mut chunks = out.chunks_exact_mut(4);
        for (c, o) in (&mut chunks).enumerate() {
            let r = r0 + 4 * c;
            o.copy_from_slice(&dot4([row(r), row(r + 1), row(r + 2), row(r + 3)]));
        }
        for (i, o) in chunks.into_remainder().iter_mut().enumerate() {
            *o = dot(row(r0 + done + i));
        }
    };
    // A product too small to pay for waking the pool runs here.
    if k * m < 64 * 1024 || jobs.concurrency() == 1 {
        y[..m].chunks_mut(ROWS).enumerate().for_each(|(t, out)| rows_of(t * ROWS, out));
        return;
    }
    let out = SendPtr(y.as_mut_ptr());
    run_tasks(jobs, m.div_ceil(ROWS), &|t| {
        let rows = t * ROWS..((t + 1) * ROWS).min(m);
        // SAFETY: `y` holds at least `m` values (checked); task `t` alone writes rows `t·ROWS..`.
        let part = unsafe { std::slice::from_raw_parts_mut(out.get().add(rows.start), rows.len()) };
        rows_of(rows.start, part);
    });
}

/// A weight element type of the mat-vec: widened to f32 one by one on the
/// portable path, loaded and widened 8 or 16 at a time by the SIMD kernels.
trait Elem: Copy + Sync {
    /// The type's name in errors.
    const NAME: &'static str;
    /// The value as f32.
    fn to_f32(self) -> f32;
    /// 8 elements at `p` as f32.
    ///
    /// # Safety
    /// AVX2/F16C available; 8 elements readable at `p`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
    /// The elements of `p` whose bit is set in `mask` (of 16) as f32, zeros elsewhere.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL and F16C available; the selected elements readable at `p`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16(p: *const Self, mask: u16) -> std::arch::x86_64::__m512;
}

impl Elem for f32 {
    const NAME: &'static str = "F32";
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> std::arch::x86_64::__m256 {
        // SAFETY: the caller's guarantee.
        unsafe { std::arch::x86_64::_mm256_loadu_ps(p) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(p: *const f32, mask: u16) -> std::arch::x86_64::__m512 {
        // SAFETY: the caller's guarantee; masked-off elements are not read (no fault).
        unsafe { std::arch::x86_64::_mm512_maskz_loadu_ps(mask, p) }
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Elem for f16 {
    const NAME: &'static str = "F16";
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's guarantee (F16C is enabled in every caller).
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(p: *const f16, mask: u16) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's guarantee; masked-off elements are not read (no fault).
        unsafe { _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p.cast())) }
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::Elem;
    use crate::isa::avx2_fn;
    use crate::quant::dot_avx2::hsum_ps;

    /// How far ahead each row is prefetched: the weights stream from memory
    /// once, and the hardware prefetcher alone does not keep enough of them
    /// in flight.
    const PREFETCH: usize = 2048;

    avx2_fn! {
        /// The dot products of `R` rows with `x`, `x` loaded once per 8 values
        /// for all rows; two accumulators per row, rows prefetched.
        pub(super) fn dot_rows<T: Elem, const R: usize>(w: [&[T]; R], x: &[f32]) -> [f32; R] {
            let n = w.iter().fold(x.len(), |n, r| n.min(r.len()));
            let mut acc = [[_mm256_setzero_ps(); 2]; R];
            // Values per step: one cache line of each row (at least 16 values).
            let step = (64 / size_of::<T>()).max(16);
            let mut i = 0;
            while i + step <= n {
                for row in &w {
                    let ahead = row.as_ptr().wrapping_add(i).cast::<i8>().wrapping_add(PREFETCH);
                    // A prefetch never faults, whatever the address.
                    _mm_prefetch::<_MM_HINT_T0>(ahead);
                }
                for u in 0..step / 8 {
                    // SAFETY: i + 8u + 8 ≤ i + step ≤ n, within x.
                    let xv = unsafe { _mm256_loadu_ps(x.as_ptr().add(i + 8 * u)) };
                    for r in 0..R {
                        // SAFETY: as above, within every row (n ≤ each row's length).
                        let wv = unsafe { T::load8(w[r].as_ptr().add(i + 8 * u)) };
                        acc[r][u % 2] = _mm256_fmadd_ps(wv, xv, acc[r][u % 2]);
                    }
                }
                i += step;
            }
            while i + 8 <= n {
                // SAFETY: i + 8 ≤ n.
                let xv = unsafe { _mm256_loadu_ps(x.as_ptr().add(i)) };
                for r in 0..R {
                    // SAFETY: as above.
                    let wv = unsafe { T::load8(w[r].as_ptr().add(i)) };
                    acc[r][0] = _mm256_fmadd_ps(wv, xv, acc[r][0]);
                }
                i += 8;
            }
            std::array::from_fn(|r| {
                let tail: f32 = w[r][i..n].iter().zip(&x[i..n]).map(|(a, b)| a.to_f32() * b).sum();
                hsum_ps(_mm256_add_ps(acc[r][0], acc[r][1])) + tail
            })
        }
    }
}

/// The AVX-512 kernel: [`avx2`]'s, 16 values per register, the row tail
/// by masked loads.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::Elem;
    use crate::isa::avx512_fn;

    /// How far ahead each row is prefetched (as the AVX2 kernel).
    const PREFETCH: usize = 2048;
    /// Values per step: 32 (one or two cache lines of each row).
    const STEP: usize = 32;

    avx512_fn! {
        /// The dot products of `R` rows with `x`, `x` loaded once per 16 values
        /// for all rows; two accumulators per row, rows prefetched.
        pub(super) fn dot_rows<T: Elem, const R: usize>(w: [&[T]; R], x: &[f32]) -> [f32; R] {
            let n = w.iter().fold(x.len(), |n, r| n.min(r.len()));
            let mut acc = [[_mm512_setzero_ps(); 2]; R];
            let lines = (STEP * size_of::<T>()).div_ceil(64);
            let mut i = 0;
            while i + STEP <= n {
                for row in &w {
                    let ahead = row.as_ptr().wrapping_add(i).cast::<i8>().wrapping_add(PREFETCH);
                    for l in 0..lines {
                        // A prefetch never faults, whatever the address.
                        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * l));
                    }
                }
                for u in 0..STEP / 16 {
                    // SAFETY: i + 16u + 16 ≤ i + STEP ≤ n, within x.
                    let xv = unsafe { _mm512_loadu_ps(x.as_ptr().add(i + 16 * u)) };
                    for r in 0..R {
                        // SAFETY: as above, within every row (n ≤ each row's length).
                        let wv = unsafe { T::load16(w[r].as_ptr().add(i + 16 * u), u16::MAX) };
                        acc[r][u % 2] = _mm512_fmadd_ps(wv, xv, acc[r][u % 2]);
                    }
                }
                i += STEP;
            }
            while i < n {
                // The last 16 or fewer: elements past n masked off.
                let mask = if n - i >= 16 { u16::MAX } else { (1u16 << (n - i)) - 1 };
                // SAFETY: the elements i..min(i + 16, n) selected by the mask are within x.
                let xv = unsafe { _mm512_maskz_loadu_ps(mask, x.as_ptr().add(i)) };
                for r in 0..R {
                    // SAFETY: as above, within every row.
                    let wv = unsafe { T::load16(w[r].as_ptr().add(i), mask) };
                    acc[r][0] = _mm512_fmadd_ps(wv, xv, acc[r][0]);
                }
                i += 16;
            }
            std::array::from_fn(|r| _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1])))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::quant::test_signal;

    #[test]
    fn float_mat_vecs_match_f64() {
        // Rows left over after the groups of four and after the tasks, a row
        // length with a tail after whole vectors, one and two threads.
        for (k, m, stride, threads) in [(1000, 67, 1003, 2), (1000, 67, 1003, 1), (37, 3, 40, 2), (2048, 101, 2048, 2)]
        {
            check(k, m, stride, threads);
        }
    }

    /// `k` values per row, `m` rows `stride` apart, on every available path
    /// against f64 (`pub(crate)`: `isa_tests` runs it on small shapes).
    pub(crate) fn check(k: usize, m: usize, stride: usize, threads: usize) {
        let w = test_signal(stride * m, 8);
        let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        let x = test_signal(k, 9);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        for isa in Isa::available() {
            let (mut y32, mut y16) = (vec![f32::NAN; m + 1], vec![f32::NAN; m + 1]);
            f32_mat_vec_on(isa, Rows { data: &w, k, m, row_stride: stride }, &x, &mut y32, &pool).unwrap();
            f16_mat_vec_on(isa, Rows { data: &wh, k, m, row_stride: stride }, &x, &mut y16, &pool).unwrap();
            for r in 0..m {
                let row = r * stride..r * stride + k;
                let mag: f64 = w[row.clone()].iter().zip(&x).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
                let e32: f64 = w[row.clone()].iter().zip(&x).map(|(a, b)| *a as f64 * *b as f64).sum();
                let e16: f64 = wh[row].iter().zip(&x).map(|(a, b)| a.to_f64() * *b as f64).sum();
                assert!((y32[r] as f64 - e32).abs() <= 1e-5 * mag, "{isa:?} k={k} f32 row {r}: {} vs {e32}", y32[r]);
                assert!((y16[r] as f64 - e16).abs() <= 1e-5 * mag, "{isa:?} k={k} f16 row {r}: {} vs {e16}", y16[r]);
            }
            assert!(y32[m].is_nan() && y16[m].is_nan(), "{isa:?}: wrote past row {m}");
        }
        let mut y = vec![0f32; m];
        assert!(f32_mat_vec(Rows { data: &w, k, m: m + 1, row_stride: stride }, &x, &mut y, &pool).is_err());
        assert!(f16_mat_vec(Rows { data: &wh, k, m, row_stride: stride }, &x[..k - 1], &mut y, &pool).is_err());
    }
}
