// SUM_ROWS / MEAN: one workgroup per row; p.f.x multiplies the sum (1 or 1/ne0).

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    let rows = p.src0.ne.y * p.src0.ne.z * p.src0.ne.w;
    if (row >= rows) { return; }
    let r = unravel(row, vec4<u32>(p.src0.ne.y, p.src0.ne.z, p.src0.ne.w, 1u));
    let base = src0_at(vec4<u32>(0u, r.x, r.y, r.z));
    var s = 0.0;
    for (var i = lid; i < p.src0.ne.x; i += 256u) {
        s += src0_ld(base + i * p.src0.nb.x);
    }
    partial[lid] = s;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (lid < w) { partial[lid] += partial[lid + w]; }
        workgroupBarrier();
    }
    if (lid == 0u) {
        dst_st(dst_at(vec4<u32>(0u, r.x, r.y, r.z)), partial[0] * p.f.x);
    }
}
