//! Gated linear units: SWIGLU, GEGLU, REGLU, GEGLU_ERF, GEGLU_QUICK and
//! gpt-oss's SWIGLU_OAI, fused (one source holding both halves of each
//! row) or split (activation input and gate in two sources).

use gantry_engine::{Context, DType, GluOp, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::unary::gelu_erf;
use super::{is_float, shape_err, src, src_desc};
use crate::parallel::Par;
use crate::simd;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let Some(a) = src_desc(ctx, d, 0) else { return false };
    let gate_ok = match d.srcs[1] {
        None => true,
        Some(_) => src_desc(ctx, d, 1).is_some_and(|b| b.dtype == a.dtype),
    };
    // SWIGLU_OAI in F32 only, as ggml's CPU backend has it.
    let dtype_ok = if matches!(d.op, Op::SwigluOai { .. }) { a.dtype == DType::F32 } else { is_float(a.dtype) };
    dtype_ok && a.dtype == d.dtype && gate_ok
}

/// The activation of a unit: one of the plain GLUs, or SWIGLU_OAI's.
#[derive(Clone, Copy)]
pub enum Gate {
    /// `act(x) * g`.
    Glu(GluOp),
    /// `x = min(x, limit)`, `g = clamp(g, -limit, limit)`,
    /// `x * sigmoid(alpha * x) * (g + 1)`.
    Oai { alpha: f32, limit: f32 },
}

/// SWIGLU_OAI of one element, with C++'s `std::min` / `std::clamp`
/// comparisons (ggml's), so a NaN input stays NaN as there.
#[inline]
fn swiglu_oai(x: f32, g: f32, alpha: f32, limit: f32) -> f32 {
    let x = if limit < x { limit } else { x };
    let g = if g < -limit {
        -limit
    } else if limit < g {
        limit
    } else {
        g
    };
    x / (1.0 + (-alpha * x).exp()) * (g + 1.0)
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, gate_op: Gate, swapped: bool, par: &Par<'_>) -> Result<()> {
    let a = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let gate = d.srcs[1].map(|g| Bound::src(ctx, g)).transpose()?;
    let dst = Bound::dst(ctx, t)?;
    let nc = dst.ne[0];
    let rows_match = a.ne[1..] == dst.ne[1..];
    let ok = match &gate {
        None => rows_match && a.ne[0] == 2 * nc,
        Some(g) => rows_match && a.ne == dst.ne && g.ne == dst.ne,
    };
    if !ok {
        return Err(shape_err(ctx, t, d, format!("sources {:?} do not fit a result of {:?}", a.ne, dst.ne)));
    }
    let cost = 8 * nc;
    par.for_each(dst.nrows(), cost, 2 * nc, |rows, tmp| {
        let (x, g) = tmp.split_at_mut(nc);
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            // SAFETY: indices in range; this thread owns row r of dst; all reads
            // of the row finish before it is written.
            unsafe {
                match &gate {
                    Some(gb) => {
                        a.load_row(i1, i2, i3, x);
                        gb.load_row(i1, i2, i3, g);
                    }
                    None => {
                        // The fused row is [first half | second half].
                        let mut both = [&mut *x, &mut *g];
                        if swapped {
                            both.swap(0, 1);
                        }
                        let [first, second] = both;
                        a.load_row(i1, i2, i3, first);
                        load_row_tail(&a, i1, i2, i3, nc, second);
                    }
                }
            }
            let op = match gate_op {
                Gate::Glu(op) => op,
                Gate::Oai { alpha, limit } => {
                    x.iter_mut().zip(g.iter()).for_each(|(v, &g)| *v = swiglu_oai(*v, g, alpha, limit));
                    // SAFETY: as above.
                    unsafe { dst.store_row(i1, i2, i3, x) };
                    continue;
                }
            };
            match op {
                GluOp::Swiglu => simd::silu_in_place(x),
                GluOp::Geglu => simd::gelu_in_place(x),
                GluOp::GegluErf => x.iter_mut().for_each(|v| *v = gelu_erf(*v)),
                GluOp::GegluQuick => simd::gelu_quick_in_place(x),
                // ggml's REGLU skips the gate where x <= 0, so an infinite
                // gate there gives 0, not relu(x) * g's NaN.
                GluOp::Reglu => x.iter_mut().zip(g.iter_mut()).for_each(|(v, g)| {
                    if *v <= 0.0 || v.is_nan() {
                        (*v, *g) = (0.0, 1.0);
                    }
                }),
            }
            x.iter_mut().zip(g.iter()).for_each(|(v, g)| *v *= g);
            // SAFETY: as above.
            unsafe { dst.store_row(i1, i2, i3, x) };
        }
    });
    Ok(())
}

/// Loads elements `skip..skip + out.len()` of a row.
///
/// # Safety
/// Row indices in range and `skip + out.len() <= ne[0]`.
unsafe fn load_row_tail(b: &Bound, i1: usize, i2: usize, i3: usize, skip: usize, out: &mut [f32]) {
    let shifted = Bound {
        // SAFETY: element `skip` of the row is inside the tensor.
        base: unsafe { b.at(skip, 0, 0, 0) },
        ne: [out.len(), b.ne[1], b.ne[2], b.ne[3]],
        ..*b
    };
    // SAFETY: the shifted view addresses elements skip.. of the same rows.
    unsafe { shifted.load_row(i1, i2, i3, out) }
}

#[cfg(test)]
mod tests {
    use super::swiglu_oai;

    #[test]
    fn swiglu_oai_clamps_like_ggml() {
        // Below the limit: x * sigmoid(alpha x) * (g + 1).
        let want = 0.5 / (1.0 + (-1.702f32 * 0.5).exp()) * 1.25;
        assert_eq!(swiglu_oai(0.5, 0.25, 1.702, 7.0), want);
        // x clamped from above only, the gate on both sides.
        assert_eq!(swiglu_oai(100.0, -100.0, 1.0, 7.0), 7.0 / (1.0 + (-7f32).exp()) * -6.0);
        assert!(swiglu_oai(-100.0, 0.0, 1.0, 7.0).abs() < 1e-30);
        assert!(swiglu_oai(f32::NAN, 0.0, 1.0, 7.0).is_nan());
    }
}
