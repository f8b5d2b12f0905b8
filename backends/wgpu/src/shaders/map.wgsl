// Element-wise functions of one tensor: the unary ops, SCALE and CLAMP.
// MAP_OP selects the function; p.f holds SCALE's (scale, bias) and CLAMP's (min, max).

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

fn map_value(x: f32) -> f32 {
    switch MAP_OP {
        case 0u: { return -x; }
        case 1u: { return abs(x); }
        case 2u: { return x * x; }
        case 3u: { return sqrt(x); }
        case 4u: { return exp(x); }
        case 5u: { return log(x); }
        case 6u: { return tanh_safe(x); }
        case 7u: { return max(x, 0.0); }
        case 8u: { return gelu_tanh(x); }
        case 9u: { return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476)); }
        case 10u: { return x / (1.0 + exp(-x)); }
        case 11u: { return 1.0 / (1.0 + exp(-x)); }
        case 12u: { return x * p.f.x + p.f.y; }
        case 13u: { return min(max(x, p.f.x), p.f.y); }
        default: { return x; }
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    dst_st(dst_at(c), map_value(src0_ld(src0_at(c))));
}
