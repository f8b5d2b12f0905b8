// SWIGLU / GEGLU: act(x) * g, with (x, g) from `glu_pair(c)`: for the fused
// form src0's rows hold [first half, second half] and x is the first half
// unless p.u.x (swapped) is set; for the split form x is src0's, g src1's.

fn tanh_safe(x: f32) -> f32 { return tanh(clamp(x, -15.0, 15.0)); }

fn act(x: f32) -> f32 {
    if (GLU_OP == 0u) { return x / (1.0 + exp(-x)); }
    let sqrt_2_over_pi = 0.7978845608028654;
    return 0.5 * x * (1.0 + tanh_safe(sqrt_2_over_pi * x * (1.0 + 0.044715 * x * x)));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let xg = glu_pair(c);
    dst_st(dst_at(c), act(xg.x) * xg.y);
}
