//! Matrix-vector products with F16 and F32 weights (token generation with
//! unquantized weights): one streaming pass over the weights, rows split over
//! the threads, AVX2/F16C where available.
//!
//! These exist because a general GEMM is built for reuse that a single
//! column does not have; the CPU backend's F32/F16 MUL_MAT (not in this
//! module) can route `N = 1` here.

use gantry_engine::{Error, Result};
use half::f16;
use rayon::prelude::*;

use super::Isa;

/// Rows per parallel task.
const ROWS: usize = 32;

fn check(what: &str, len: usize, k: usize, m: usize, row_stride: usize, x: usize, y: usize) -> Result<()> {
    let fits = m == 0
        || (row_stride >= k
            && (m - 1).checked_mul(row_stride).and_then(|s| s.checked_add(k)).is_some_and(|s| s <= len));
    if !fits || x < k || y < m {
        return Err(Error::InvalidOp {
            op: "MUL_MAT",
            reason: format!(
                "{what} mat-vec: {m} rows of {k} (stride {row_stride}) in {len} values, x of {x}, y of {y}"
            ),
        });
    }
    Ok(())
}

/// `y[r] = Σ_t w[r·row_stride + t]·x[t]` for `r < m`, F32 weights.
pub fn f32_mat_vec(
    w: &[f32],
    k: usize,
    m: usize,
    row_stride: usize,
    x: &[f32],
    y: &mut [f32],
    pool: &rayon::ThreadPool,
) -> Result<()> {
    check("F32", w.len(), k, m, row_stride, x.len(), y.len())?;
    let isa = Isa::best();
    mat_vec_rows(w, k, m, row_stride, y, pool, |row| match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only handed out after checking the CPU.
        Isa::Avx2 => unsafe { avx2::dot_f32(row, &x[..k]) },
        _ => row.iter().zip(x).map(|(a, b)| a * b).sum(),
    });
    Ok(())
}

/// `y[r] = Σ_t w[r·row_stride + t]·x[t]` for `r < m`, F16 weights (exact
/// widening to f32, f32 products and sums).
pub fn f16_mat_vec(
    w: &[f16],
    k: usize,
    m: usize,
    row_stride: usize,
    x: &[f32],
    y: &mut [f32],
    pool: &rayon::ThreadPool,
) -> Result<()> {
    check("F16", w.len(), k, m, row_stride, x.len(), y.len())?;
    let isa = Isa::best();
    mat_vec_rows(w, k, m, row_stride, y, pool, |row| match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only handed out after checking the CPU.
        Isa::Avx2 => unsafe { avx2::dot_f16(row, &x[..k]) },
        _ => row.iter().zip(x).map(|(a, b)| a.to_f32() * b).sum(),
    });
    Ok(())
}

/// `y[r] = dot(row r of w)` for `r < m`, `ROWS` results per parallel task.
fn mat_vec_rows<T: Sync>(
    w: &[T],
    k: usize,
    m: usize,
    row_stride: usize,
    y: &mut [f32],
    pool: &rayon::ThreadPool,
    dot: impl Fn(&[T]) -> f32 + Sync,
) {
    pool.install(|| {
        y[..m].par_chunks_mut(ROWS).enumerate().for_each(|(t, out)| {
            for (i, o) in out.iter_mut().enumerate() {
                let r = t * ROWS + i;
                *o = dot(&w[r * row_stride..r * row_stride + k]);
            }
        });
    });
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use half::f16;

    use super::super::dot_avx2::hsum_ps;

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn dot_f32(w: &[f32], x: &[f32]) -> f32 {
        let n = w.len().min(x.len());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (l, a) in acc.iter_mut().enumerate() {
                // SAFETY: i + 8l + 8 ≤ n, within both slices.
                unsafe {
                    let wv = _mm256_loadu_ps(w.as_ptr().add(i + 8 * l));
                    let xv = _mm256_loadu_ps(x.as_ptr().add(i + 8 * l));
                    *a = _mm256_fmadd_ps(wv, xv, *a);
                }
            }
            i += 32;
        }
        let tail: f32 = w[i..n].iter().zip(&x[i..n]).map(|(a, b)| a * b).sum();
        hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) + tail
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn dot_f16(w: &[f16], x: &[f32]) -> f32 {
        let n = w.len().min(x.len());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (l, a) in acc.iter_mut().enumerate() {
                // SAFETY: i + 8l + 8 ≤ n, within both slices; f16 is two bytes.
                unsafe {
                    let wv = _mm256_cvtph_ps(_mm_loadu_si128(w.as_ptr().add(i + 8 * l).cast()));
                    let xv = _mm256_loadu_ps(x.as_ptr().add(i + 8 * l));
                    *a = _mm256_fmadd_ps(wv, xv, *a);
                }
            }
            i += 32;
        }
        let tail: f32 = w[i..n].iter().zip(&x[i..n]).map(|(a, b)| a.to_f32() * b).sum();
        hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) + tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::quant::test_signal;

    #[test]
    fn float_mat_vecs_match_f64() {
        let (k, m, stride) = (1000, 67, 1003);
        let w = test_signal(stride * m, 8);
        let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        let x = test_signal(k, 9);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let (mut y32, mut y16) = (vec![0f32; m], vec![0f32; m]);
        f32_mat_vec(&w, k, m, stride, &x, &mut y32, &pool).unwrap();
        f16_mat_vec(&wh, k, m, stride, &x, &mut y16, &pool).unwrap();
        for r in 0..m {
            let row = r * stride..r * stride + k;
            let mag: f64 = w[row.clone()].iter().zip(&x).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
            let e32: f64 = w[row.clone()].iter().zip(&x).map(|(a, b)| *a as f64 * *b as f64).sum();
            let e16: f64 = wh[row].iter().zip(&x).map(|(a, b)| a.to_f64() * *b as f64).sum();
            assert!((y32[r] as f64 - e32).abs() <= 1e-5 * mag, "f32 row {r}");
            assert!((y16[r] as f64 - e16).abs() <= 1e-5 * mag, "f16 row {r}");
        }
        assert!(f32_mat_vec(&w, k, m + 1, stride, &x, &mut y32, &pool).is_err());
        assert!(f16_mat_vec(&wh, k, m, stride, &x[..k - 1], &mut y16, &pool).is_err());
    }
}
