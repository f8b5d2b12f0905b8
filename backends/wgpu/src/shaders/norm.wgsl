// NORM (NORM_RMS false): (x - mean) / sqrt(var + eps); RMS_NORM: x / sqrt(mean(x^2) + eps);
// L2_NORM (NORM_L2, with NORM_RMS): x / max(sqrt(sum(x^2)), eps).
// One workgroup per row; eps in p.f.x. Each element is read before its own
// position is written, so dst may alias src0.

var<workgroup> partial: array<f32, 256>;

fn row_sum(s: f32, lid: u32) -> f32 {
    partial[lid] = s;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (lid < w) { partial[lid] += partial[lid + w]; }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    let rows = p.src0.ne.y * p.src0.ne.z * p.src0.ne.w;
    if (row >= rows) { return; }
    let r = unravel(row, vec4<u32>(p.src0.ne.y, p.src0.ne.z, p.src0.ne.w, 1u));
    let c = vec4<u32>(0u, r.x, r.y, r.z);
    let src = src0_at(c);
    let out = dst_at(c);
    let n = p.src0.ne.x;
    var mean = 0.0;
    if (!NORM_RMS) {
        var s = 0.0;
        for (var i = lid; i < n; i += 256u) { s += src0_ld(src + i * p.src0.nb.x); }
        mean = row_sum(s, lid) / f32(n);
    }
    var s2 = 0.0;
    for (var i = lid; i < n; i += 256u) {
        let v = src0_ld(src + i * p.src0.nb.x) - mean;
        s2 += v * v;
    }
    let total = row_sum(s2, lid);
    var inv = 1.0 / sqrt(total / f32(n) + p.f.x);
    if (NORM_L2) { inv = 1.0 / max(sqrt(total), p.f.x); }
    for (var i = lid; i < n; i += 256u) {
        dst_st(out + i * p.dst.nb.x, (src0_ld(src + i * p.src0.nb.x) - mean) * inv);
    }
}
