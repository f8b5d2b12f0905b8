// SET and ACC: one invocation per element of the contiguous dst: src0's
// element, or inside the view of src1 (at element offset u.x with element
// strides u.y, u.z, u.w for dims 1 to 3) src1's element (SET) or their sum
// (ACC, `acc_elem`). The plan checked that the view lies inside dst with
// strides nested (each above the extent of the dims below it), so an
// element's position in the view is found dim by dim from the top, and is
// checked against src1's shape before src1 is read.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    var inside = i >= p.u.x;
    var r = i - select(0u, p.u.x, inside);
    let ne = p.src1.ne;
    let strides = vec3<u32>(p.u.y, p.u.z, p.u.w);
    var v = vec4<u32>(0u);
    for (var k = 3u; k >= 1u && inside; k--) {
        if (ne[k] > 1u) {
            v[k] = r / strides[k - 1u];
            r -= v[k] * strides[k - 1u];
            inside = v[k] < ne[k];
        }
    }
    v.x = r;
    inside = inside && r < ne.x;
    if (inside) {
        elem_from_view(dst_at(c), src0_at(c), src1_at(v));
    } else {
        elem_from_src0(dst_at(c), src0_at(c));
    }
}
