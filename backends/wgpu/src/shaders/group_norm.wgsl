// GROUP_NORM: one workgroup per (group, sample): the mean and variance of
// the group's channels of one sample, then (x - mean) / sqrt(var + eps).
// u.x: groups, u.y: channels per group; f.x: eps.

var<workgroup> partial: array<f32, 256>;

fn group_sum(s: f32, lid: u32) -> f32 {
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
    let item = flat_group(wid, nwg);
    let ne = p.src0.ne;
    if (item >= p.u.x * ne.w) { return; }
    let g = item % p.u.x;
    let n = item / p.u.x;
    let c0 = min(g * p.u.y, ne.z);
    let c1 = min(c0 + p.u.y, ne.z);
    let plane = ne.x * ne.y;
    let count = plane * (c1 - c0);
    if (count == 0u) { return; }
    var s = 0.0;
    for (var k = lid; k < count; k += 256u) {
        s += src0_ld(src0_at(vec4<u32>(k % ne.x, (k / ne.x) % ne.y, c0 + k / plane, n)));
    }
    let mean = group_sum(s, lid) / f32(count);
    var s2 = 0.0;
    for (var k = lid; k < count; k += 256u) {
        let v = src0_ld(src0_at(vec4<u32>(k % ne.x, (k / ne.x) % ne.y, c0 + k / plane, n))) - mean;
        s2 += v * v;
    }
    let scale = 1.0 / sqrt(group_sum(s2, lid) / f32(count) + p.f.x);
    for (var k = lid; k < count; k += 256u) {
        let at = vec4<u32>(k % ne.x, (k / ne.x) % ne.y, c0 + k / plane, n);
        dst_st(dst_at(at), (src0_ld(src0_at(at)) - mean) * scale);
    }
}
