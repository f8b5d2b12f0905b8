// GATED_DELTA_NET: one invocation per (row j of the state (along v), head,
// sequence), carrying the row `m[j · S + i]` (entry [i, j] of the state, i
// along k) through the tokens in the CPU's order: decay (per head, or per
// key element for KDA), `delta = (v[j] - Σ_i m[i] · k[i]) · beta`,
// `m[i] += k[i] · delta`, `y[j] = (Σ_i m[i] · q[i]) · scale` (sums in index
// order). The row lives in its final-state place in dst; kept snapshots
// are copied from it.
// Sources: src0 q, src1 k (`[S, H_qk, T, n_seqs_qk]`), src2 v
// (`[S, H, T, n_seqs]`), src3 g (`[1 or S, H, T, n_seqs]`), src4 beta, src5
// the states `[S, S, H, n_seqs]`; q, k, v with dense rows, any strides
// (checked). dst: the outputs (v's elements), then K blocks of states.
// u.x: K (kept states); u.y, u.z: sequences per q, per k sequence;
// u.w: KDA (a gate per key element); f.x: scale.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let inv = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    let s = p.src2.ne.x;
    let h = p.src2.ne.y;
    let n_t = p.src2.ne.z;
    let n_seqs = p.src2.ne.w;
    if (inv >= s * h * n_seqs) { return; }
    let j = inv % s;
    let head = (inv / s) % h;
    let seq = inv / (s * h);
    let k_states = p.u.x;
    let kda = p.u.w != 0u;
    let pair = seq * h + head;
    let y_len = n_elements(p.src2.ne);
    let state_len = n_elements(p.src5.ne);
    let m = dst_off() + y_len + pair * s * s + j * s;
    let q_head = head % p.src0.ne.y;
    let q_seq = seq / p.u.y;
    let k_head = head % p.src1.ne.y;
    let k_seq = seq / p.u.z;
    for (var i = 0u; i < s; i++) { dst_st(m + i, src5_ld(src5_at(vec4<u32>(i, j, head, seq)))); }
    for (var tok = 0u; tok < n_t; tok++) {
        let b_val = src4_ld(src4_at(vec4<u32>(0u, head, tok, seq)));
        if (kda) {
            for (var i = 0u; i < s; i++) {
                dst_st(m + i, dst_ld(m + i) * exp(src3_ld(src3_at(vec4<u32>(i, head, tok, seq)))));
            }
        } else {
            let decay = exp(src3_ld(src3_at(vec4<u32>(0u, head, tok, seq))));
            for (var i = 0u; i < s; i++) { dst_st(m + i, dst_ld(m + i) * decay); }
        }
        var mk = 0.0;
        for (var i = 0u; i < s; i++) { mk += dst_ld(m + i) * src1_ld(src1_at(vec4<u32>(i, k_head, tok, k_seq))); }
        let delta = (src2_ld(src2_at(vec4<u32>(j, head, tok, seq))) - mk) * b_val;
        var mq = 0.0;
        for (var i = 0u; i < s; i++) {
            let next = dst_ld(m + i) + src1_ld(src1_at(vec4<u32>(i, k_head, tok, k_seq))) * delta;
            dst_st(m + i, next);
            mq += next * src0_ld(src0_at(vec4<u32>(i, q_head, tok, q_seq)));
        }
        dst_st(dst_off() + ((seq * n_t + tok) * h + head) * s + j, mq * p.f.x);
        // The CPU keeps the state `slot` tokens before the end in snapshot `slot` (0 < slot < K).
        let slot = n_t - 1u - tok;
        if (slot > 0u && slot < k_states) {
            let snap = dst_off() + y_len + slot * state_len + pair * s * s + j * s;
            for (var i = 0u; i < s; i++) { dst_st(snap + i, dst_ld(m + i)); }
        }
    }
    // Snapshots from before the first token: zeros, as on the CPU.
    for (var slot = max(n_t, 1u); slot < k_states; slot++) {
        let snap = dst_off() + y_len + slot * state_len + pair * s * s + j * s;
        for (var i = 0u; i < s; i++) { dst_st(snap + i, 0.0); }
    }
}
