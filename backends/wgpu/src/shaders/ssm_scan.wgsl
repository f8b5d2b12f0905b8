// SSM_SCAN: one invocation per state row (row i1 of head h of sequence
// i3), carrying it through the sequence's tokens in the order the CPU does
// (each token's output summed over the state in index order). Sources:
// src0 s (initial states [d_state, head_dim, n_head, n]), src1 x, src2 dt,
// src3 A, src4 B, src5 C, src6 ids. The row lives in its final-state place
// in dst, read back each token: no per-invocation array of d_state.
// u: K (kept states), heads per group, Mamba-1 (A per state element).
//
// The sequence's state index from ids is checked before any state is
// read: outside s's states (a kernel cannot report an error, where the CPU
// fails the compute) the invocation reads no state and writes NaN into
// the row's outputs and every snapshot of the row.

fn y_index(i1: u32, h: u32, i2: u32, i3: u32) -> u32 {
    return i1 + p.src1.ne.x * (h + p.src1.ne.y * (i2 + p.src1.ne.z * i3));
}

// Element i0 of the row (i1, h) of snapshot `slot` of sequence i3 in dst.
fn state_index(slot: u32, i3: u32, i1: u32, h: u32, i0: u32) -> u32 {
    let nc = p.src0.ne.x;
    let state_len = nc * p.src0.ne.y * p.src0.ne.z;
    let y_len = n_elements(p.src1.ne);
    return dst_at(vec4<u32>(y_len + (slot * p.src1.ne.w + i3) * state_len + i1 * nc + h * nc * p.src0.ne.y + i0, 0u, 0u, 0u));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    let nr = p.src1.ne.x;
    let nh = p.src1.ne.y;
    let nt = p.src1.ne.z;
    let ns = p.src1.ne.w;
    let nc = p.src0.ne.x;
    if (i >= nr * nh * ns) { return; }
    let i1 = i % nr;
    let h = (i / nr) % nh;
    let i3 = i / (nr * nh);
    let k_states = p.u.x;
    let g = h / p.u.y;
    let mamba1 = p.u.z != 0u;

    let id = src6_ldi(src6_at(vec4<u32>(i3, 0u, 0u, 0u)));
    if (id < 0 || u32(id) >= p.src0.ne.w) {
        let nan = bitcast<f32>(0x7fc00000u);
        for (var i2 = 0u; i2 < nt; i2++) { dst_st(dst_at(vec4<u32>(y_index(i1, h, i2, i3), 0u, 0u, 0u)), nan); }
        for (var slot = 0u; slot < k_states; slot++) {
            for (var i0 = 0u; i0 < nc; i0++) { dst_st(state_index(slot, i3, i1, h, i0), nan); }
        }
        return;
    }

    for (var i0 = 0u; i0 < nc; i0++) {
        dst_st(state_index(0u, i3, i1, h, i0), src0_ld(src0_at(vec4<u32>(i0, i1, h, u32(id)))));
    }
    for (var i2 = 0u; i2 < nt; i2++) {
        let dt_sp = softplus(src2_ld(src2_at(vec4<u32>(h, i2, i3, 0u))));
        let x_dt = src1_ld(src1_at(vec4<u32>(i1, h, i2, i3))) * dt_sp;
        let da2 = exp(dt_sp * src3_ld(src3_at(vec4<u32>(0u, h, 0u, 0u))));
        // ggml keeps the state `slot` tokens before the end in snapshot `slot` (0 < slot < K).
        let slot = nt - 1u - i2;
        let keep = slot > 0u && slot < k_states;
        var sum = 0.0;
        for (var i0 = 0u; i0 < nc; i0++) {
            var da = da2;
            if (mamba1) { da = exp(dt_sp * src3_ld(src3_at(vec4<u32>(i0, h, 0u, 0u)))); }
            let at = state_index(0u, i3, i1, h, i0);
            let v = dst_ld(at) * da + src4_ld(src4_at(vec4<u32>(i0, g, i2, i3))) * x_dt;
            dst_st(at, v);
            if (keep) { dst_st(state_index(slot, i3, i1, h, i0), v); }
            sum += v * src5_ld(src5_at(vec4<u32>(i0, g, i2, i3)));
        }
        dst_st(dst_at(vec4<u32>(y_index(i1, h, i2, i3), 0u, 0u, 0u)), sum);
    }
    // Snapshots from before the first token: zeros, as on the CPU.
    for (var slot = max(nt, 1u); slot < k_states; slot++) {
        for (var i0 = 0u; i0 < nc; i0++) { dst_st(state_index(slot, i3, i1, h, i0), 0.0); }
    }
}
