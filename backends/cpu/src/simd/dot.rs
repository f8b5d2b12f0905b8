//! Dot products of one row (F32, F16 or BF16) with one or four F32 columns:
//! the AVX2 bodies (`super::avx2`) where the CPU has them, independent lane
//! sums in plain Rust otherwise.

use half::{bf16, f16};

#[cfg(target_arch = "x86_64")]
use super::avx2;
use super::convert::bf16_to_f32;
#[cfg(target_arch = "x86_64")]
use super::detect::{has_avx2_fma, has_f16c};

/// `sum(a[i] * b[i])` over the shorter length.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; both slices hold `n` elements.
        return unsafe { avx2::dot(&a[..n], &b[..n], |p, i| avx2::load_f32(p, i)) };
    }
    dot_portable(&a[..n], &b[..n], |x| x)
}

/// The dot product without SIMD intrinsics: independent lane sums.
#[inline(always)]
fn dot_portable<T: Copy>(a: &[T], b: &[f32], widen: impl Fn(T) -> f32) -> f32 {
    let (ca, ra) = a.as_chunks::<8>();
    let (cb, rb) = b.as_chunks::<8>();
    let mut acc = [0f32; 8];
    for (x, y) in ca.iter().zip(cb) {
        for i in 0..8 {
            acc[i] += widen(x[i]) * y[i];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| widen(*x) * y).sum();
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// [`dot_f16`] of `a` with each of `bs`, reading `a` once: each result has
/// the bits of its own [`dot_f16`] call (the attention of several heads
/// that share one K row scores it once, as the one-head path would).
pub fn dot_f16_each<const R: usize>(a: &[f16], bs: [&[f32]; R]) -> [f32; R] {
    let n = bs.iter().fold(a.len(), |n, b| n.min(b.len()));
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX2, FMA and F16C; every slice holds at least `n` elements.
        return unsafe { avx2::dot_each(&a[..n], bs, |p, i| avx2::load_f16(p, i)) };
    }
    bs.map(|b| dot_portable(&a[..n], &b[..n], f16::to_f32))
}

/// Dot products of one row with four columns, reading the row once.
pub fn dot4_f32(a: &[f32], cols: [&[f32]; 4]) -> [f32; 4] {
    let n = cols.iter().fold(a.len(), |n, c| n.min(c.len()));
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; every slice holds at least `n` elements.
        return unsafe { avx2::dot4(&a[..n], cols, |p, i| avx2::load_f32(p, i)) };
    }
    cols.map(|c| dot_portable(&a[..n], &c[..n], |x| x))
}

/// [`dot4_f32`] with the row in IEEE half precision.
pub fn dot4_f16(a: &[f16], cols: [&[f32]; 4]) -> [f32; 4] {
    let n = cols.iter().fold(a.len(), |n, c| n.min(c.len()));
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX2, FMA and F16C; every slice holds at least `n` elements.
        return unsafe { avx2::dot4(&a[..n], cols, |p, i| avx2::load_f16(p, i)) };
    }
    cols.map(|c| dot_portable(&a[..n], &c[..n], f16::to_f32))
}

/// [`dot4_f32`] with the row in bfloat16.
pub fn dot4_bf16(a: &[bf16], cols: [&[f32]; 4]) -> [f32; 4] {
    let n = cols.iter().fold(a.len(), |n, c| n.min(c.len()));
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; every slice holds at least `n` elements.
        return unsafe { avx2::dot4(&a[..n], cols, |p, i| avx2::load_bf16(p, i)) };
    }
    cols.map(|c| dot_portable(&a[..n], &c[..n], bf16_to_f32))
}

/// `sum(a[i] * b[i])` with `a` in bfloat16.
pub fn dot_bf16(a: &[bf16], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; both slices hold `n` elements.
        return unsafe { avx2::dot(&a[..n], &b[..n], |p, i| avx2::load_bf16(p, i)) };
    }
    dot_portable(&a[..n], &b[..n], bf16_to_f32)
}

/// `sum(a[i] * b[i])` with `a` in IEEE half precision.
pub fn dot_f16(a: &[f16], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX2, FMA and F16C; both slices hold `n` elements.
        return unsafe { avx2::dot(&a[..n], &b[..n], |p, i| avx2::load_f16(p, i)) };
    }
    dot_portable(&a[..n], &b[..n], f16::to_f32)
}
