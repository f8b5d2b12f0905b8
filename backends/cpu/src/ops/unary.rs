//! Element-wise functions of one tensor: the unary ops, SCALE, CLAMP,
//! LEAKY_RELU and XIELU.
//! Rows are converted to f32, transformed, and stored back, so every float
//! dtype and any strides (views, permutes, in place) take the same path.

use gantry_engine::{Context, Op, Result, TensorDesc, TensorId, UnaryOp};

use super::bound::Bound;
use super::{is_float, shape_err, src, src_desc};
use crate::parallel::Par;
use crate::simd;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|s| is_float(s.dtype) && s.dtype == d.dtype)
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let s = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    if s.ne != dst.ne {
        return Err(shape_err(ctx, t, d, format!("source shape {:?} differs from the result's", s.ne)));
    }
    let op = d.op;
    // Transcendental functions cost more than a load and a store.
    let cost = match op {
        Op::Unary(
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Sqr
            | UnaryOp::Relu
            | UnaryOp::Hardswish
            | UnaryOp::Hardsigmoid
            | UnaryOp::Step
            | UnaryOp::Sgn
            | UnaryOp::Round
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Trunc,
        )
        | Op::Scale { .. }
        | Op::Clamp { .. }
        | Op::LeakyRelu { .. } => 1,
        _ => 8,
    };
    let n0 = dst.ne[0];
    par.for_each(dst.nrows(), n0 * cost, n0, |rows, tmp| {
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            // SAFETY: the row index is in range; this thread owns row r of dst
            // and reads only row r of the source (equal when in place).
            unsafe { s.load_row(i1, i2, i3, tmp) };
            apply(op, tmp);
            // SAFETY: as above.
            unsafe { dst.store_row(i1, i2, i3, tmp) };
        }
    });
    Ok(())
}

fn apply(op: Op, x: &mut [f32]) {
    match op {
        Op::Scale { scale, bias } => scale_bias(x, scale, bias),
        Op::Clamp { min, max } => x.iter_mut().for_each(|v| *v = v.min(max).max(min)),
        Op::LeakyRelu { negative_slope } => simd::leaky_relu_in_place(x, negative_slope),
        Op::Unary(u) => apply_unary(u, x),
        Op::Xielu { alpha_n, alpha_p, beta, eps } => x.iter_mut().for_each(|v| {
            *v = if *v > 0.0 { alpha_p * *v * *v + beta * *v } else { (v.min(eps).exp_m1() - *v) * alpha_n + beta * *v }
        }),
        _ => {}
    }
}

simd::multiversion! {
    fn scale_bias(x: &mut [f32], scale: f32, bias: f32) {
        for v in x.iter_mut() {
            *v = v.mul_add(scale, bias);
        }
    }
}

/// Applies a unary function to a row in place.
pub fn apply_unary(op: UnaryOp, x: &mut [f32]) {
    match op {
        UnaryOp::Neg => x.iter_mut().for_each(|v| *v = -*v),
        UnaryOp::Abs => x.iter_mut().for_each(|v| *v = v.abs()),
        UnaryOp::Sqr => x.iter_mut().for_each(|v| *v *= *v),
        UnaryOp::Sqrt => x.iter_mut().for_each(|v| *v = v.sqrt()),
        UnaryOp::Exp => simd::exp_in_place(x),
        UnaryOp::Log => x.iter_mut().for_each(|v| *v = v.ln()),
        UnaryOp::Tanh => x.iter_mut().for_each(|v| *v = v.tanh()),
        UnaryOp::Relu => x.iter_mut().for_each(|v| *v = v.max(0.0)),
        UnaryOp::Gelu => simd::gelu_in_place(x),
        UnaryOp::GeluErf => x.iter_mut().for_each(|v| *v = gelu_erf(*v)),
        UnaryOp::Silu => simd::silu_in_place(x),
        UnaryOp::Sigmoid => simd::sigmoid_in_place(x),
        UnaryOp::Sin => x.iter_mut().for_each(|v| *v = v.sin()),
        UnaryOp::Cos => x.iter_mut().for_each(|v| *v = v.cos()),
        UnaryOp::Softplus => x.iter_mut().for_each(|v| *v = softplus(*v)),
        // `exp_m1` rather than ggml's `expf(x) - 1`: the same function
        // without the cancellation near 0.
        UnaryOp::Elu => x.iter_mut().for_each(|v| *v = if *v > 0.0 { *v } else { v.exp_m1() }),
        UnaryOp::Hardswish => simd::hardswish_in_place(x),
        UnaryOp::Hardsigmoid => simd::hardsigmoid_in_place(x),
        UnaryOp::GeluQuick => simd::gelu_quick_in_place(x),
        UnaryOp::Step => simd::step_in_place(x),
        UnaryOp::Sgn => simd::sgn_in_place(x),
        UnaryOp::Round => simd::round_in_place(x),
        UnaryOp::Floor => simd::floor_in_place(x),
        UnaryOp::Ceil => simd::ceil_in_place(x),
        UnaryOp::Trunc => simd::trunc_in_place(x),
        UnaryOp::Expm1 => x.iter_mut().for_each(|v| *v = v.exp_m1()),
    }
}

/// `ln(1 + e^x)`, and `x` above 20 as ggml does (there `ln(1 + e^x)` is `x`
/// to f32 precision). `ln_1p` keeps the small values of very negative `x`,
/// which `ln(1 + e^x)` rounds to 0.
#[inline]
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

/// GELU with the error function.
#[inline]
pub fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The error function, to about 1.2e-7 absolute: `1 - erfc` with the
/// Chebyshev fit of `erfc` from Numerical Recipes (`erfcc`), evaluated in f64.
pub fn erf(x: f32) -> f32 {
    let z = (x as f64).abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    let r = 1.0 - erfc;
    (if x < 0.0 { -r } else { r }) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_known_values() {
        // Values of erf from tables (Abramowitz & Stegun, table 7.1).
        for (x, e) in [(0.0, 0.0), (0.5, 0.520_499_877_8), (1.0, 0.842_700_792_9), (2.0, 0.995_322_265_0)] {
            assert!((erf(x) as f64 - e).abs() < 2e-7, "erf({x})");
            assert!((erf(-x) as f64 + e).abs() < 2e-7, "erf(-{x})");
        }
        assert_eq!(erf(10.0), 1.0);
    }

    #[test]
    fn roundings_follow_c() {
        let xs = [-2.5f32, -1.5, -0.5, -0.49999997, 0.0, 0.49999997, 0.5, 1.5, 2.5, 3.7, -3.7, 8_388_609.0];
        for (op, f) in [
            (UnaryOp::Round, f32::round as fn(f32) -> f32),
            (UnaryOp::Floor, f32::floor),
            (UnaryOp::Ceil, f32::ceil),
            (UnaryOp::Trunc, f32::trunc),
        ] {
            let mut y = xs;
            apply_unary(op, &mut y);
            for (x, y) in xs.iter().zip(y) {
                assert_eq!(y, f(*x), "{}({x})", op.name());
            }
        }
    }

    #[test]
    fn step_sign_and_leaky_relu_at_the_edges() {
        let xs = [-2.0f32, -0.0, 0.0, 3.0, f32::NAN];
        let mut s = xs;
        apply_unary(UnaryOp::Step, &mut s);
        assert_eq!(s.map(f32::to_bits), [0.0f32, 0.0, 0.0, 1.0, 0.0].map(f32::to_bits));
        let mut s = xs;
        apply_unary(UnaryOp::Sgn, &mut s);
        assert_eq!(s.map(f32::to_bits), [-1.0f32, 0.0, 0.0, 1.0, 0.0].map(f32::to_bits));
        let mut s = [-2.0f32, 0.0, 3.0];
        apply(Op::LeakyRelu { negative_slope: 0.1 }, &mut s);
        assert_eq!(s, [-0.2, 0.0, 3.0]);
        assert_eq!(softplus(30.0), 30.0);
        assert!((softplus(-30.0) - (-30.0f64).exp() as f32).abs() < 1e-18);
    }
}
