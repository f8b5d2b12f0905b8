//! `y += alpha x` (x in F32, or F16 through the AVX2 body) and `y *= s`.

use half::f16;

#[cfg(target_arch = "x86_64")]
use super::avx2;
#[cfg(target_arch = "x86_64")]
use super::detect::has_f16c;
use super::multiversion::{madd, multiversion};

multiversion! {
    /// `y[i] += alpha * x[i]`.
    pub fn axpy(y: &mut [f32], alpha: f32, x: &[f32]) {
        for (y, x) in y.iter_mut().zip(x) {
            *y = madd::<FMA>(alpha, *x, *y);
        }
    }
}

/// `y[i] += alpha * x[i]` with `x` in IEEE half precision.
pub fn axpy_f16(y: &mut [f32], alpha: f32, x: &[f16]) {
    let n = y.len().min(x.len());
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX2, FMA and F16C; both slices hold `n` elements.
        return unsafe { avx2::axpy(&mut y[..n], alpha, &x[..n], |p, i| avx2::load_f16(p, i)) };
    }
    for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
        *y += alpha * x.to_f32();
    }
}

/// [`axpy_f16`] into each of `ys` with its own alpha, reading `x` once:
/// each `y` ends with the bits its own [`axpy_f16`] call leaves.
pub fn axpy_f16_each<const R: usize>(ys: [&mut [f32]; R], alphas: [f32; R], x: &[f16]) {
    let n = ys.iter().fold(x.len(), |n, y| n.min(y.len()));
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX2, FMA and F16C; every slice holds at least `n` elements.
        return unsafe { avx2::axpy_each(ys, alphas, &x[..n], |p, i| avx2::load_f16(p, i)) };
    }
    for (y, alpha) in ys.into_iter().zip(alphas) {
        for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
            *y += alpha * x.to_f32();
        }
    }
}

multiversion! {
    /// `y[i] *= s`.
    pub fn scale(y: &mut [f32], s: f32) {
        for y in y.iter_mut() {
            *y *= s;
        }
    }
}
