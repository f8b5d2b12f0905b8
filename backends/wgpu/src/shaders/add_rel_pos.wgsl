// ADD_REL_POS (SAM): one invocation per result element,
// `out[y · n + x, q, b] = a + ph[y, q, b] + pw[x, q, b]` (q split as
// q1 + n_w · q2), the two terms added in the CPU's (ggml's) order: the one
// of the lower index first. src0 the scores, src1 pw, src2 ph; the plan
// checked their shapes as the CPU does.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let n = p.src1.ne.x;
    let q1 = p.src1.ne.y;
    let y = c.x / n;
    let x = c.x % n;
    let j1 = c.y % q1;
    let j2 = c.y / q1;
    let a = src0_ld(src0_at(c));
    let h_term = src2_ld(src2_at(vec4<u32>(y, j1, j2, c.z)));
    let w_term = src1_ld(src1_at(vec4<u32>(x, j1, j2, c.z)));
    var v = 0.0;
    if (y <= x) { v = a + h_term + w_term; } else { v = a + w_term + h_term; }
    dst_st(dst_at(c), v);
}
