//! Element-wise ops in f64.

use gantry_engine::{BinaryOp, GluOp, UnaryOp};

use super::Array;

/// `f` applied to every element.
pub fn map(a: &Array, f: impl Fn(f64) -> f64) -> Result<Array, String> {
    Ok(Array { ne: a.ne, data: a.data.iter().map(|&x| f(x)).collect() })
}

/// `a (op) b` with `b` repeated: `b`'s index along each dim is `i % b.ne`.
pub fn binary(op: BinaryOp, a: &Array, b: &Array) -> Result<Array, String> {
    if (0..4).any(|k| b.ne[k] == 0 || !a.ne[k].is_multiple_of(b.ne[k])) {
        return Err(format!("{:?} does not repeat into {:?}", b.ne, a.ne));
    }
    let mut out = Array::filled(a.ne, 0.0);
    for i in Array::indices(a.ne) {
        let j = [i[0] % b.ne[0], i[1] % b.ne[1], i[2] % b.ne[2], i[3] % b.ne[3]];
        let (x, y) = (a.at(i), b.at(j));
        let v = match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
        };
        out.set(i, v);
    }
    Ok(out)
}

/// The error function, from its series `erf(x) = 2/sqrt(pi) e^(-x^2) *
/// sum_n 2^n x^(2n+1) / (1*3*...*(2n+1))`, whose terms are all positive (no
/// cancellation), to full f64 precision for |x| < 6; beyond, erf is ±1.
pub fn erf(x: f64) -> f64 {
    if x.abs() >= 6.0 {
        return x.signum();
    }
    let mut term = x;
    let mut sum = x;
    let mut n = 0.0;
    while term.abs() > 1e-17 * sum.abs() {
        n += 1.0;
        term *= 2.0 * x * x / (2.0 * n + 1.0);
        sum += term;
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum
}

/// GELU, tanh approximation, in f64.
pub fn gelu(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

/// GELU's sigmoid approximation `x * sigmoid(1.702 x)` (ggml's `gelu_quick`), in f64.
pub fn gelu_quick(x: f64) -> f64 {
    x / (1.0 + (-1.702 * x).exp())
}

/// `min(1, max(0, (x + 3) / 6))`, in f64.
fn hard_sigmoid(x: f64) -> f64 {
    ((x + 3.0) / 6.0).clamp(0.0, 1.0)
}

/// GELU with the exact error function, in f64.
pub fn gelu_erf(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

/// A unary function in f64.
pub fn unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sqr => x * x,
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Gelu => gelu(x),
        UnaryOp::GeluErf => gelu_erf(x),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Softplus => {
            if x > 20.0 {
                x
            } else {
                x.exp().ln_1p()
            }
        }
        UnaryOp::Elu => {
            if x > 0.0 {
                x
            } else {
                x.exp_m1()
            }
        }
        UnaryOp::Hardswish => x * hard_sigmoid(x),
        UnaryOp::Hardsigmoid => hard_sigmoid(x),
        UnaryOp::GeluQuick => gelu_quick(x),
        UnaryOp::Step => {
            if x > 0.0 {
                1.0
            } else {
                0.0
            }
        }
        UnaryOp::Sgn => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        // Rust's round, like C's roundf, takes halves away from zero.
        UnaryOp::Round => x.round(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Trunc => x.trunc(),
        UnaryOp::Expm1 => x.exp_m1(),
    }
}

/// ggml's LEAKY_RELU: `x` where positive, `slope * x` where negative, in f64.
pub fn leaky_relu(x: f64, slope: f64) -> f64 {
    x.max(0.0) + slope * x.min(0.0)
}

/// A gated linear unit: `act(x) * g`. Fused (`gate` absent): each row of
/// `a` is `[x | g]` (`[g | x]` when swapped); split: `x = a`, `g = gate`.
pub fn glu(op: GluOp, swapped: bool, a: &Array, gate: Option<&Array>) -> Result<Array, String> {
    // (x, g) -> act(x) * g; ggml's REGLU skips the gate where x <= 0.
    let glu = |x: f64, g: f64| match op {
        GluOp::Swiglu => x / (1.0 + (-x).exp()) * g,
        GluOp::Geglu => gelu(x) * g,
        GluOp::Reglu => {
            if x > 0.0 {
                x * g
            } else {
                0.0
            }
        }
        GluOp::GegluErf => gelu_erf(x) * g,
        GluOp::GegluQuick => gelu_quick(x) * g,
    };
    gated(a, gate, swapped, glu)
}

/// gpt-oss's SWIGLU_OAI: `x = min(x, limit)`, `g = clamp(g, -limit,
/// limit)`, `x * sigmoid(alpha x) * (g + 1)`.
pub fn swiglu_oai(a: &Array, gate: Option<&Array>, swapped: bool, alpha: f64, limit: f64) -> Result<Array, String> {
    gated(a, gate, swapped, |x, g| {
        let x = x.min(limit);
        let g = g.max(-limit).min(limit);
        x / (1.0 + (-alpha * x).exp()) * (g + 1.0)
    })
}

/// A gated unit `f(x, g)`: `x` and `g` from two sources, or the halves of
/// `a`'s rows (`x` the first unless `swapped`).
fn gated(a: &Array, gate: Option<&Array>, swapped: bool, f: impl Fn(f64, f64) -> f64) -> Result<Array, String> {
    let (nc, ne) = match gate {
        Some(_) => (a.ne[0], a.ne),
        None => (a.ne[0] / 2, [a.ne[0] / 2, a.ne[1], a.ne[2], a.ne[3]]),
    };
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        let (x, g) = match gate {
            Some(g) => (a.at(i), g.at(i)),
            None => {
                let first = a.at(i);
                let second = a.at([i[0] + nc, i[1], i[2], i[3]]);
                if swapped { (second, first) } else { (first, second) }
            }
        };
        out.set(i, f(x, g));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_tables() {
        for (x, e) in [(0.1, 0.112_462_916_018_284_9), (1.0, 0.842_700_792_949_714_9), (3.0, 0.999_977_909_503_001_4)] {
            assert!((erf(x) - e).abs() < 1e-15, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + e).abs() < 1e-15);
        }
    }
}
