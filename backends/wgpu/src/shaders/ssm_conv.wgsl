// SSM_CONV: one invocation per result element (channel, token, sequence):
// the dot product of the channel's window in src0 (sx) with its kernel row
// in src1 (c), summed in kernel order as the CPU does. The plan checked the
// shapes: token + k < sx.ne.x for every k < c.ne.x.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    var sum = 0.0;
    for (var k = 0u; k < p.src1.ne.x; k++) {
        sum += src0_ld(src0_at(vec4<u32>(c.y + k, c.x, c.z, 0u))) * src1_ld(src1_at(vec4<u32>(k, c.x, 0u, 0u)));
    }
    dst_st(dst_at(c), sum);
}
