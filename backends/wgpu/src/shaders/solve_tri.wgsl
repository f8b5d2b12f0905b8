// SOLVE_TRI: `A X = B` for lower-triangular A (src0 `[n, n, ...]`, row i
// of A is A's dim 1), B src1 `[k, n, ...]`. One invocation per
// right-hand-side column of one batch, forward substitution in the CPU's
// order: each row's sum over the columns before the diagonal in index
// order, then `(b - sum) / a_ii`. The column's earlier rows are read back
// from dst, written by this invocation alone.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let u = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    let k = p.dst.ne.x;
    let n = p.dst.ne.y;
    if (u >= k * p.dst.ne.z * p.dst.ne.w) { return; }
    let col = u % k;
    let batch = u / k;
    let i2 = batch % p.dst.ne.z;
    let i3 = batch / p.dst.ne.z;
    for (var i = 0u; i < n; i++) {
        var sum = 0.0;
        for (var j = 0u; j < i; j++) {
            sum += src0_ld(src0_at(vec4<u32>(j, i, i2, i3))) * dst_ld(dst_at(vec4<u32>(col, j, i2, i3)));
        }
        let x = (src1_ld(src1_at(vec4<u32>(col, i, i2, i3))) - sum) / src0_ld(src0_at(vec4<u32>(i, i, i2, i3)));
        dst_st(dst_at(vec4<u32>(col, i, i2, i3)), x);
    }
}
