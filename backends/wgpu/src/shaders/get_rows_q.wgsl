// GET_ROWS for quantized src0: one invocation dequantizes 8 consecutive
// elements of a picked row with `deq8` (row start in bytes, element index).

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    let shape = vec4<u32>(p.dst.ne.x / 8u, p.dst.ne.y, p.dst.ne.z, p.dst.ne.w);
    if (i >= n_elements(shape)) { return; }
    let c = unravel(i, shape);
    let k = c.x * 8u;
    let r = src1_ldi(src1_at(vec4<u32>(c.y, c.z, c.w, 0u)));
    let d = dst_at(vec4<u32>(k, c.y, c.z, c.w));
    if (r < 0 || u32(r) >= p.src0.ne.y) {
        for (var t = 0u; t < 8u; t++) { dst_st(d + t * p.dst.nb.x, 0.0); }
        return;
    }
    let v = deq8(src0_at(vec4<u32>(0u, u32(r), c.z, c.w)), k);
    for (var t = 0u; t < 8u; t++) { dst_st(d + t * p.dst.nb.x, v[t]); }
}
