// RWKV_WKV6: one invocation per (column j of the S × S state, head,
// sequence), carrying the column through the sequence's tokens: for each
// token `out[j] = Σ_i r[i] · (tf[i] · k[i] · v[j] + st[i, j])` (summed over
// i in index order, as the CPU does), then `st[i, j] = st[i, j] · td[i] +
// k[i] · v[j]`. The column lives in its final-state place in dst.
// Sources (all contiguous, checked): src0 k, src1 v, src2 r (`[S, H, T]`),
// src3 tf (`[S, H]`), src4 td, src5 the states (S · S · H per sequence).
// dst: T · S · H outputs, then the states. u.x: sequences.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let inv = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    let s = p.src0.ne.x;
    let h = p.src0.ne.y;
    let n_t = p.src0.ne.z;
    let n_seqs = p.u.x;
    if (inv >= s * h * n_seqs) { return; }
    let j = inv % s;
    let head = (inv / s) % h;
    let seq = inv / (s * h);
    let c = s * h;
    let per_seq = n_t / n_seqs;
    let st_in = (seq * h + head) * s * s;
    let st = dst_off() + n_t * c + st_in;
    for (var i = 0u; i < s; i++) { dst_st(st + i * s + j, src5_ld(src5_off() + st_in + i * s + j)); }
    for (var tok = seq * per_seq; tok < (seq + 1u) * per_seq; tok++) {
        let at = tok * c + head * s;
        let v_j = src1_ld(src1_off() + at + j);
        var o = 0.0;
        for (var i = 0u; i < s; i++) {
            let kv = v_j * src0_ld(src0_off() + at + i);
            let prev = dst_ld(st + i * s + j);
            o += (kv * src3_ld(src3_off() + head * s + i) + prev) * src2_ld(src2_off() + at + i);
            dst_st(st + i * s + j, prev * src4_ld(src4_off() + at + i) + kv);
        }
        dst_st(dst_off() + at + j, o);
    }
}
