// SOFT_MAX: softmax(x * scale + slope * mask) per row; one workgroup per row.
// p.f = (scale, max_bias, m0, m1), p.u.x = n_head_log2 (ALiBi), p.u.y = 1 with a mask.
// `mask_at(c)` reads the mask (0 without one), `sink_at(h)` head h's
// attention sink (-inf without sinks: it then adds nothing). dst may alias src0.

var<workgroup> partial: array<f32, 256>;

fn reduce(v: f32, lid: u32, is_max: bool) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (lid < w) {
            if (is_max) { partial[lid] = max(partial[lid], partial[lid + w]); }
            else { partial[lid] += partial[lid + w]; }
        }
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
    let n = p.src0.ne.x;
    let src = src0_at(vec4<u32>(0u, r.x, r.y, r.z));
    let out = dst_at(vec4<u32>(0u, r.x, r.y, r.z));
    var slope = 1.0;
    if (p.f.y > 0.0) {
        let h = r.y;
        let n_log2 = p.u.x;
        slope = select(pow(p.f.w, f32(2u * (h - n_log2) + 1u)), pow(p.f.z, f32(h + 1u)), h < n_log2);
    }
    let neg_inf = bitcast<f32>(0xff800000u);
    var m = neg_inf;
    for (var i = lid; i < n; i += 256u) {
        let v = src0_ld(src + i * p.src0.nb.x) * p.f.x + slope * mask_at(vec4<u32>(i, r.x, r.y, r.z));
        m = max(m, v);
    }
    m = reduce(m, lid, true);
    // The sink joins the row's softmax as one more logit with no output.
    let sink = sink_at(r.y);
    m = max(m, sink);
    var s = 0.0;
    for (var i = lid; i < n; i += 256u) {
        let v = src0_ld(src + i * p.src0.nb.x) * p.f.x + slope * mask_at(vec4<u32>(i, r.x, r.y, r.z));
        s += exp(v - m);
    }
    let inv = 1.0 / (reduce(s, lid, false) + exp(sink - m));
    for (var i = lid; i < n; i += 256u) {
        let v = src0_ld(src + i * p.src0.nb.x) * p.f.x + slope * mask_at(vec4<u32>(i, r.x, r.y, r.z));
        dst_st(out + i * p.dst.nb.x, exp(v - m) * inv);
    }
}
