// Element-wise functions of one tensor: the unary ops, SCALE, CLAMP and
// LEAKY_RELU. MAP_OP selects the function: a unary op's position in
// UnaryOp::ALL (each case names it; a test checks the numbers), then SCALE,
// CLAMP and LEAKY_RELU (`map_op_index`). p.f holds SCALE's (scale, bias),
// CLAMP's (min, max) and LEAKY_RELU's negative slope.

fn map_value(x: f32) -> f32 {
    switch MAP_OP {
        case 0u: { return -x; } // NEG
        case 1u: { return abs(x); } // ABS
        case 2u: { return x * x; } // SQR
        case 3u: { return sqrt(x); } // SQRT
        case 4u: { return exp(x); } // EXP
        case 5u: { return log(x); } // LOG
        case 6u: { return tanh_safe(x); } // TANH
        case 7u: { return max(x, 0.0); } // RELU
        case 8u: { return gelu_tanh(x); } // GELU
        case 9u: { return gelu_erf(x); } // GELU_ERF
        case 10u: { return x / (1.0 + exp(-x)); } // SILU
        case 11u: { return 1.0 / (1.0 + exp(-x)); } // SIGMOID
        case 12u: { return sin(x); } // SIN
        case 13u: { return cos(x); } // COS
        case 14u: { return softplus(x); } // SOFTPLUS
        case 15u: { return select(expm1_accurate(x), x, x > 0.0); } // ELU
        case 16u: { return x * min(1.0, max(0.0, (x + 3.0) / 6.0)); } // HARDSWISH
        case 17u: { return min(1.0, max(0.0, (x + 3.0) / 6.0)); } // HARDSIGMOID
        case 18u: { return gelu_quick(x); } // GELU_QUICK
        case 19u: { return select(0.0, 1.0, x > 0.0); } // STEP
        case 20u: { return select(select(0.0, -1.0, x < 0.0), 1.0, x > 0.0); } // SGN
        case 21u: { return round_away(x); } // ROUND
        case 22u: { return floor(x); } // FLOOR
        case 23u: { return ceil(x); } // CEIL
        case 24u: { return trunc(x); } // TRUNC
        case 25u: { return expm1_accurate(x); } // EXPM1
        case 26u: { return x * p.f.x + p.f.y; } // SCALE
        case 27u: { return min(max(x, p.f.x), p.f.y); } // CLAMP
        case 28u: { return select(0.0, x, x > 0.0) + p.f.x * select(0.0, x, x < 0.0); } // LEAKY_RELU
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
