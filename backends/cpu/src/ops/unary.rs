//! Element-wise functions of one tensor: the unary ops, SCALE and CLAMP.
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
        Op::Unary(UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqr | UnaryOp::Relu) | Op::Scale { .. } | Op::Clamp { .. } => {
            1
        }
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
        Op::Unary(u) => apply_unary(u, x),
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
    }
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
}
