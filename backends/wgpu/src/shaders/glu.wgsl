// The gated linear units: act(x) * g, with (x, g) from `glu_pair(c)`: for
// the fused form src0's rows hold [first half, second half] and x is the
// first half unless p.u.x (swapped) is set; for the split form x is src0's,
// g src1's. GLU_OP is the activation's position in GluOp::ALL.

// gpt-oss: x clamped from above by p.f.y (limit), the gate on both sides,
// x * sigmoid(alpha x) * (g + 1) with alpha p.f.x; C++'s min / clamp
// comparisons, as ggml writes them.
fn swiglu_oai(x0: f32, g0: f32) -> f32 {
    let alpha = p.f.x;
    let limit = p.f.y;
    let x = select(x0, limit, limit < x0);
    let g = select(select(g0, limit, limit < g0), -limit, g0 < -limit);
    return x / (1.0 + exp(-alpha * x)) * (g + 1.0);
}

fn glu_value(x: f32, g: f32) -> f32 {
    switch GLU_OP {
        case 0u: { return x / (1.0 + exp(-x)) * g; } // SWIGLU
        case 1u: { return gelu_tanh(x) * g; } // GEGLU
        // ggml's REGLU skips the gate where x <= 0 (an infinite gate gives 0 there).
        case 2u: { return select(0.0, x * g, x > 0.0); } // REGLU
        case 3u: { return gelu_erf(x) * g; } // GEGLU_ERF
        case 4u: { return gelu_quick(x) * g; } // GEGLU_QUICK
        case 5u: { return swiglu_oai(x, g); } // SWIGLU_OAI
        default: { return x * g; }
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let xg = glu_pair(c);
    dst_st(dst_at(c), glu_value(xg.x, xg.y));
}
