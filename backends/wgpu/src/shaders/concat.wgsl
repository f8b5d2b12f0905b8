// CONCAT along dimension p.u.x.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let dim = p.u.x;
    let n0 = p.src0.ne[dim];
    if (c[dim] < n0) {
        mov0(dst_at(c), src0_at(c));
    } else {
        var c1 = c;
        c1[dim] = c[dim] - n0;
        mov1(dst_at(c), src1_at(c1));
    }
}
