// WIN_PART and WIN_UNPART (SAM's windows): one invocation per result
// element, copying one element of the image or of a window (WIN_PART's
// windows past the image's edge read zeros). The plan checked the shapes
// as the CPU checks them, and that window positions fit 32 bits.
// u.x: windows across (npx); u.y: the window's side (w).
// WIN_UNPART comes with the instance.

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let npx = p.u.x;
    let w = p.u.y;
    if (WIN_UNPART) {
        // Pixel (c.y, c.z) of the image is in window (c.z / w) · npx + c.y / w.
        let win = (c.z / w) * npx + c.y / w;
        dst_st(dst_at(c), src0_ld(src0_at(vec4<u32>(c.x, c.y % w, c.z % w, win))));
    } else {
        // Element (c.y, c.z) of window c.w is pixel (x, y) of the image.
        let x = (c.w % npx) * w + c.y;
        let y = (c.w / npx) * w + c.z;
        var v = 0.0;
        if (x < p.src0.ne.y && y < p.src0.ne.z) { v = src0_ld(src0_at(vec4<u32>(c.x, x, y, 0u))); }
        dst_st(dst_at(c), v);
    }
}
