// Activation functions shared by map.wgsl (the unary ops) and glu.wgsl (the
// gated linear units), so that GELU in a GEGLU is the GELU of the GELU op.

fn tanh_safe(x: f32) -> f32 {
    // tanh(+-15) is +-1 in f32; clamping keeps exp-based implementations from inf/inf.
    return tanh(clamp(x, -15.0, 15.0));
}

fn gelu_tanh(x: f32) -> f32 {
    let sqrt_2_over_pi = 0.7978845608028654;
    return 0.5 * x * (1.0 + tanh_safe(sqrt_2_over_pi * x * (1.0 + 0.044715 * x * x)));
}

// erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7).
fn erf_approx(x: f32) -> f32 {
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-a * a));
}

fn gelu_erf(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476));
}

// ggml's quick GELU, x * sigmoid(1.702 x). For very negative x the
// exponential is inf and the quotient the correct -0.
fn gelu_quick(x: f32) -> f32 {
    return x / (1.0 + exp(-1.702 * x));
}

// e^x - 1 without exp(x) - 1's cancellation near 0 (WGSL has no expm1): a
// Taylor polynomial below 0.1 in magnitude, where its first omitted term is
// under 2e-9 of the value.
fn expm1_accurate(x: f32) -> f32 {
    if (abs(x) < 0.1) {
        return x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0)))));
    }
    return exp(x) - 1.0;
}

// ggml's SOFTPLUS, x itself above 20, else ln(1 + e^x) as log1p(e^x) would
// give it (WGSL has no log1p): below e^x = 0.01, where 1 + e^x would drop
// most of e^x's digits, the series e - e^2/2 + e^3/3 (next term under
// 3e-9 of the value).
fn softplus(x: f32) -> f32 {
    if (x > 20.0) { return x; }
    let e = exp(x);
    if (e < 0.01) { return e * (1.0 - e * (0.5 - e / 3.0)); }
    return log(1.0 + e);
}

// C's roundf: halves away from zero (WGSL's round() goes to even). The
// fraction x - trunc(x) is exact, so no value is pushed over by a rounded sum.
fn round_away(x: f32) -> f32 {
    let t = trunc(x);
    return select(t, t + select(-1.0, 1.0, x > 0.0), abs(x - t) >= 0.5);
}
