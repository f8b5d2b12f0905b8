//! A vectorizable `exp` and the row functions built on it: softmax's shifted
//! exponentials, SiLU, GELU (tanh approximation), quick GELU, sigmoid.

use super::multiversion::multiversion;

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

/// ggml's quick GELU coefficient: `gelu_quick(x) = x * sigmoid(1.702 x)`.
const GELU_QUICK_COEF: f32 = 1.702;

multiversion! {
    /// `x[i] = x[i] / (1 + e^(-1.702 x[i]))` (ggml's `gelu_quick`), in place.
    pub fn gelu_quick_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v /= 1.0 + exp_fast(-GELU_QUICK_COEF * *v);
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
