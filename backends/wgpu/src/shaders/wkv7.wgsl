// RWKV_WKV7: one invocation per (row i of the S × S state (along v), head,
// sequence), carrying the row through the sequence's tokens: for each
// token `sa = Σ_j a[j] · st[i, j]`, `st[i, j] = st[i, j] · w[j] + v[i] ·
// k[j] + sa · b[j]`, `out[i] = Σ_j st[i, j] · r[j]` (sums over j in index
// order, as the CPU does). The row lives in its final-state place in dst.
// Sources (all contiguous, checked): src0 r, src1 w, src2 k, src3 v,
// src4 a, src5 b (`[S, H, T]`), src6 the states (S · S · H per sequence).
// dst: T · S · H outputs, then the states. u.x: sequences.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let inv = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    let s = p.src2.ne.x;
    let h = p.src2.ne.y;
    let n_t = p.src2.ne.z;
    let n_seqs = p.u.x;
    if (inv >= s * h * n_seqs) { return; }
    let i = inv % s;
    let head = (inv / s) % h;
    let seq = inv / (s * h);
    let c = s * h;
    let per_seq = n_t / n_seqs;
    let st_in = (seq * h + head) * s * s + i * s;
    let row = dst_off() + n_t * c + st_in;
    for (var j = 0u; j < s; j++) { dst_st(row + j, src6_ld(src6_off() + st_in + j)); }
    for (var tok = seq * per_seq; tok < (seq + 1u) * per_seq; tok++) {
        let at = tok * c + head * s;
        let v_i = src3_ld(src3_off() + at + i);
        var sa = 0.0;
        for (var j = 0u; j < s; j++) { sa += src4_ld(src4_off() + at + j) * dst_ld(row + j); }
        var sum = 0.0;
        for (var j = 0u; j < s; j++) {
            let s_ij = dst_ld(row + j) * src1_ld(src1_off() + at + j) + v_i * src2_ld(src2_off() + at + j)
                + sa * src5_ld(src5_off() + at + j);
            dst_st(row + j, s_ij);
            sum += s_ij * src0_ld(src0_off() + at + j);
        }
        dst_st(dst_off() + at + i, sum);
    }
}
