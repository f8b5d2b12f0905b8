//! Vector primitives the kernels are built from: dot products, axpy,
//! reductions, and a vectorizable `exp`.
//!
//! Each is written once in plain Rust over fixed-width lane arrays, which
//! LLVM turns into SIMD code, and compiled twice by [`multiversion!`]: for
//! the baseline target and with AVX2 + FMA, chosen at run time. The F16 dot
//! product uses F16C intrinsics directly, since converting halves one by one
//! does not vectorize.

use half::{bf16, f16};

/// Whether this CPU has AVX2 and FMA (cached by std after the first query).
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU has AVX2, FMA and F16C.
#[inline]
pub fn has_f16c() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2_fma() && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Defines a function twice: a portable body, and the same body compiled
/// with AVX2 + FMA enabled; calls pick the second when the CPU has them.
/// Inside the body, the const `FMA` says which one is being compiled, so
/// [`madd`] can fuse only where that is one instruction (without FMA,
/// `f32::mul_add` is a slow library call).
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            #[allow(unused)]
            fn imp<const FMA: bool>($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) $(-> $ret)? { imp::<true>($($arg),*) }
                if $crate::cpu::simd::has_avx2_fma() {
                    // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            imp::<false>($($arg),*)
        }
    };
}
pub(crate) use multiversion;

/// `a * b + c`, fused into one instruction when `FMA` (see [`multiversion!`]).
#[inline(always)]
pub fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// `sum(a[i] * b[i])` over the shorter length.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; both slices hold `n` elements.
        return unsafe { x86::dot(&a[..n], &b[..n], |p, i| x86::load_f32(p, i)) };
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

#[inline(always)]
fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits((x.to_bits() as u32) << 16)
}

/// Dot products of one row with four columns, reading the row once.
pub fn dot4_f32(a: &[f32], cols: [&[f32]; 4]) -> [f32; 4] {
    let n = cols.iter().fold(a.len(), |n, c| n.min(c.len()));
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; every slice holds at least `n` elements.
        return unsafe { x86::dot4(&a[..n], cols, |p, i| x86::load_f32(p, i)) };
    }
    cols.map(|c| dot_portable(&a[..n], &c[..n], |x| x))
}

/// [`dot4_f32`] with the row in IEEE half precision.
pub fn dot4_f16(a: &[f16], cols: [&[f32]; 4]) -> [f32; 4] {
    let n = cols.iter().fold(a.len(), |n, c| n.min(c.len()));
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX2, FMA and F16C; every slice holds at least `n` elements.
        return unsafe { x86::dot4(&a[..n], cols, |p, i| x86::load_f16(p, i)) };
    }
    cols.map(|c| dot_portable(&a[..n], &c[..n], f16::to_f32))
}

/// [`dot4_f32`] with the row in bfloat16.
pub fn dot4_bf16(a: &[bf16], cols: [&[f32]; 4]) -> [f32; 4] {
    let n = cols.iter().fold(a.len(), |n, c| n.min(c.len()));
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; every slice holds at least `n` elements.
        return unsafe { x86::dot4(&a[..n], cols, |p, i| x86::load_bf16(p, i)) };
    }
    cols.map(|c| dot_portable(&a[..n], &c[..n], bf16_to_f32))
}

/// `sum(a[i] * b[i])` with `a` in bfloat16.
pub fn dot_bf16(a: &[bf16], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; both slices hold `n` elements.
        return unsafe { x86::dot(&a[..n], &b[..n], |p, i| x86::load_bf16(p, i)) };
    }
    dot_portable(&a[..n], &b[..n], bf16_to_f32)
}

/// `sum(a[i] * b[i])` with `a` in IEEE half precision.
pub fn dot_f16(a: &[f16], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has AVX2, FMA and F16C; both slices hold `n` elements.
        return unsafe { x86::dot(&a[..n], &b[..n], |p, i| x86::load_f16(p, i)) };
    }
    dot_portable(&a[..n], &b[..n], f16::to_f32)
}

/// AVX2 kernels written with intrinsics, where the auto-vectorizer does not
/// produce full-width code.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use half::{bf16, f16};

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

    /// Four dot products of `a` (widened by `load`) with `cols`, one
    /// accumulator each, `a` loaded once per 8 elements.
    ///
    /// # Safety
    /// AVX2, FMA (and F16C when `load` needs it) available; every column
    /// holds at least `a.len()` elements.
    #[target_feature(enable = "avx2,fma,f16c")]
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

    /// `y[i] += alpha * x[i]` with `x` widened by `load`.
    ///
    /// # Safety
    /// AVX2, FMA (and F16C when `load` needs it) available; `y.len() == x.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
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

    /// `sum(a[i] * b[i])` with `a` widened by `load`, 4 accumulators of 8.
    ///
    /// # Safety
    /// AVX2, FMA (and F16C when `load` needs it) available; `a.len() == b.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
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
        return unsafe { x86::axpy(&mut y[..n], alpha, &x[..n], |p, i| x86::load_f16(p, i)) };
    }
    for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
        *y += alpha * x.to_f32();
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

multiversion! {
    /// The sum of `x`, accumulated in f64 (as ggml's `ggml_vec_sum_f32`).
    pub fn sum_f64(x: &[f32]) -> f64 {
        let mut acc = [0f64; 8];
        let c = x.chunks_exact(8);
        let r = c.remainder();
        for v in c {
            for i in 0..8 {
                acc[i] += v[i] as f64;
            }
        }
        acc.iter().sum::<f64>() + r.iter().map(|&v| v as f64).sum::<f64>()
    }
}

multiversion! {
    /// `sum((x[i] - shift)^2)`, accumulated in f64.
    pub fn sum_sq_f64(x: &[f32], shift: f32) -> f64 {
        let mut acc = [0f64; 8];
        let c = x.chunks_exact(8);
        let r = c.remainder();
        for v in c {
            for i in 0..8 {
                let d = (v[i] - shift) as f64;
                acc[i] += d * d;
            }
        }
        acc.iter().sum::<f64>() + r.iter().map(|&v| ((v - shift) as f64).powi(2)).sum::<f64>()
    }
}

multiversion! {
    /// The largest element (`-inf` for an empty slice; NaNs are skipped).
    pub fn max(x: &[f32]) -> f32 {
        let mut acc = [f32::NEG_INFINITY; 8];
        let c = x.chunks_exact(8);
        let r = c.remainder();
        for v in c {
            for i in 0..8 {
                acc[i] = acc[i].max(v[i]);
            }
        }
        r.iter().fold(acc.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)), |m, &v| m.max(v))
    }
}

/// `e^x` to about 1 ulp, in plain arithmetic that vectorizes: `x = n ln2 + r`
/// with `|r| <= ln2/2`, a degree-7 Taylor polynomial for `e^r`, and `2^n`
/// built in the exponent bits (no float-to-int conversion: `n` is read from
/// the mantissa of `x log2(e) + 1.5 * 2^23`). Underflows to 0 below -87.33
/// (and for `-inf`), overflows to `inf` above 88.37 (`e^88.37` is within 25%
/// of `f32::MAX`); NaN stays NaN.
#[inline(always)]
pub fn exp_fast(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding 1.5 * 2^23 rounds to an integer kept in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    const LO: f32 = -87.33;
    const HI: f32 = 88.37;
    let xc = x.clamp(LO, HI);
    let t = xc * LOG2E + ROUND;
    let n = t - ROUND;
    let ni = t.to_bits() as i32 - ROUND.to_bits() as i32;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p: f32 = 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    // n is in [-126, 127]: a normal power of two.
    let y = p * f32::from_bits(((ni + 127) << 23) as u32);
    let y = if x < LO { 0.0 } else { y };
    let y = if x > HI { f32::INFINITY } else { y };
    if x.is_nan() { x } else { y }
}

multiversion! {
    /// `dst[i] = e^(src[i] - max)`; returns the sum in f64 (ggml's
    /// `ggml_vec_soft_max_f32`). Partial sums of 8 lanes stay in f32 for 64
    /// elements at a time, then go into the f64 total.
    pub fn exp_shifted(dst: &mut [f32], src: &[f32], max: f32) -> f64 {
        let n = dst.len().min(src.len());
        let (d, s) = (&mut dst[..n], &src[..n]);
        let mut total = 0f64;
        let mut dc = d.chunks_exact_mut(64);
        let mut sc = s.chunks_exact(64);
        for (dd, ss) in (&mut dc).zip(&mut sc) {
            let mut acc = [0f32; 8];
            for (d8, s8) in dd.chunks_exact_mut(8).zip(ss.chunks_exact(8)) {
                for l in 0..8 {
                    let e = exp_fast(s8[l] - max);
                    d8[l] = e;
                    acc[l] += e;
                }
            }
            total += acc.iter().map(|&v| v as f64).sum::<f64>();
        }
        for (d, s) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
            let e = exp_fast(*s - max);
            *d = e;
            total += e as f64;
        }
        total
    }
}

multiversion! {
    /// `x[i] = x[i] / (1 + e^-x[i])` (SiLU), in place.
    pub fn silu_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v /= 1.0 + exp_fast(-*v);
        }
    }
}

/// `sqrt(2 / pi)`, the constant of GELU's tanh approximation.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
/// The cubic coefficient of GELU's tanh approximation.
const GELU_COEF_A: f32 = 0.044_715;

/// GELU, tanh approximation (ggml's `ggml_gelu_f32`, without its f16
/// table): `0.5 x (1 + tanh(u))` with `u = sqrt(2/pi) (x + 0.044715 x^3)`,
/// computed as `x / (1 + e^(-2u))` (the same value), which vectorizes and
/// does not cancel for negative `x`.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let u = SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x);
    x / (1.0 + exp_fast(-2.0 * u))
}

multiversion! {
    /// `x[i] = gelu(x[i])`, in place.
    pub fn gelu_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = gelu(*v);
        }
    }
}

multiversion! {
    /// `x[i] = 1 / (1 + e^-x[i])`, in place.
    pub fn sigmoid_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = 1.0 / (1.0 + exp_fast(-*v));
        }
    }
}

multiversion! {
    /// `x[i] = e^x[i]`, in place.
    pub fn exp_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = exp_fast(*v);
        }
    }
}

/// Converts halves to floats (F16C when available, through `half`).
pub fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    let n = src.len().min(dst.len());
    src[..n].convert_to_f32_slice(&mut dst[..n]);
}

/// Converts floats to halves, rounding to nearest even.
pub fn f32_to_f16(src: &[f32], dst: &mut [f16]) {
    use half::slice::HalfFloatSliceExt;
    let n = src.len().min(dst.len());
    dst[..n].convert_from_f32_slice(&src[..n]);
}

multiversion! {
    /// Converts bfloat16 values to floats (exact).
    pub fn bf16_to_f32_slice(src: &[bf16], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = bf16_to_f32(*s);
        }
    }
}

/// Converts floats to bfloat16, rounding to nearest even (NaN stays NaN).
pub fn f32_to_bf16_slice(src: &[f32], dst: &mut [bf16]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = bf16::from_f32(*s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n).map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 2001) as f32 / 1000.0 - 1.0).collect()
    }

    #[test]
    fn dots_match_f64_for_every_length() {
        for n in [0, 1, 7, 8, 31, 32, 33, 100, 1000] {
            let (a, b) = (data(n, 1), data(n, 2));
            let exact: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
            assert!((dot_f32(&a, &b) as f64 - exact).abs() < 1e-4, "f32 n={n}");
            let ah: Vec<f16> = a.iter().map(|&v| f16::from_f32(v)).collect();
            let exact_h: f64 = ah.iter().zip(&b).map(|(x, y)| x.to_f64() * *y as f64).sum();
            assert!((dot_f16(&ah, &b) as f64 - exact_h).abs() < 1e-4, "f16 n={n}");
            let ab: Vec<bf16> = a.iter().map(|&v| bf16::from_f32(v)).collect();
            let exact_b: f64 = ab.iter().zip(&b).map(|(x, y)| x.to_f64() * *y as f64).sum();
            assert!((dot_bf16(&ab, &b) as f64 - exact_b).abs() < 1e-4, "bf16 n={n}");
        }
    }

    #[test]
    fn four_column_dots_match_single_dots() {
        for n in [0, 3, 8, 37, 300] {
            let a = data(n, 9);
            let cols: Vec<Vec<f32>> = (0..4).map(|j| data(n, 20 + j)).collect();
            let c = [&cols[0][..], &cols[1][..], &cols[2][..], &cols[3][..]];
            let ah: Vec<f16> = a.iter().map(|&v| f16::from_f32(v)).collect();
            let ab: Vec<bf16> = a.iter().map(|&v| bf16::from_f32(v)).collect();
            for j in 0..4 {
                assert!((dot4_f32(&a, c)[j] - dot_f32(&a, c[j])).abs() < 1e-4, "n={n}");
                assert!((dot4_f16(&ah, c)[j] - dot_f16(&ah, c[j])).abs() < 1e-4, "n={n}");
                assert!((dot4_bf16(&ab, c)[j] - dot_bf16(&ab, c[j])).abs() < 1e-4, "n={n}");
            }
        }
    }

    #[test]
    fn exp_fast_is_accurate_and_handles_the_edges() {
        let mut worst = 0f64;
        let mut x = -87.3f32;
        while x < 88.3 {
            let rel = ((exp_fast(x) as f64 - (x as f64).exp()) / (x as f64).exp()).abs();
            worst = worst.max(rel);
            x += 0.0137;
        }
        assert!(worst < 4e-7, "worst relative error {worst}");
        assert_eq!(exp_fast(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_fast(-100.0), 0.0);
        assert_eq!(exp_fast(100.0), f32::INFINITY);
        assert!(exp_fast(88.3).is_finite() && exp_fast(-87.3) > 0.0);
        assert!(exp_fast(f32::NAN).is_nan());
        assert_eq!(exp_fast(0.0), 1.0);
        for x in [-20.0f32, -3.0, -0.5, -1e-3, 0.0, 1e-3, 0.7, 2.5, 9.0, 60.0] {
            let xd = x as f64;
            let exact =
                0.5 * xd * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (xd + 0.044715 * xd * xd * xd)).tanh());
            assert!((gelu(x) as f64 - exact).abs() <= 1e-6 * exact.abs().max(1e-3), "gelu({x})");
        }
    }

    #[test]
    fn reductions_and_updates() {
        let x = data(37, 3);
        let s: f64 = x.iter().map(|&v| v as f64).sum();
        assert!((sum_f64(&x) - s).abs() < 1e-9);
        let ss: f64 = x.iter().map(|&v| ((v - 0.5) as f64).powi(2)).sum();
        assert!((sum_sq_f64(&x, 0.5) - ss).abs() < 1e-9);
        assert_eq!(max(&x), x.iter().cloned().fold(f32::NEG_INFINITY, f32::max));
        assert_eq!(max(&[]), f32::NEG_INFINITY);
        let mut y = vec![1.0; 37];
        axpy(&mut y, 2.0, &x);
        assert!(y.iter().zip(&x).all(|(y, x)| (*y - (1.0 + 2.0 * x)).abs() < 1e-6));
        let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let mut yh = vec![1.0; 37];
        axpy_f16(&mut yh, -0.5, &xh);
        assert!(yh.iter().zip(&xh).all(|(y, x)| (*y - (1.0 - 0.5 * x.to_f32())).abs() < 1e-6));
        let mut e = vec![0.0; 37];
        let total = exp_shifted(&mut e, &x, 1.0);
        let expect: f64 = x.iter().map(|&v| ((v - 1.0) as f64).exp()).sum();
        assert!((total - expect).abs() < 1e-5);
    }
}
