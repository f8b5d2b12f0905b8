// ARGMAX: one workgroup per row; the first index of the largest value (as ggml).

var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= p.src0.ne.y) { return; }
    let base = src0_at(vec4<u32>(0u, row, 0u, 0u));
    var bv = bitcast<f32>(0xff800000u);
    var bi = 0xffffffffu;
    for (var i = lid; i < p.src0.ne.x; i += 256u) {
        let v = src0_ld(base + i * p.src0.nb.x);
        if (bi == 0xffffffffu || v > bv) { bv = v; bi = i; }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (lid < w) {
            let ov = best_v[lid + w];
            let oi = best_i[lid + w];
            let mine = best_i[lid];
            let take = oi != 0xffffffffu && (mine == 0xffffffffu || ov > best_v[lid] || (ov == best_v[lid] && oi < mine));
            if (take) { best_v[lid] = ov; best_i[lid] = oi; }
        }
        workgroupBarrier();
    }
    if (lid == 0u) { dst_sti(dst_off() + row * p.dst.nb.x, i32(best_i[0])); }
}
