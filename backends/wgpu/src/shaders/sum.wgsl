// SUM: one workgroup adds every element of src0.

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    let n = n_elements(p.src0.ne);
    var s = 0.0;
    for (var i = lid; i < n; i += 256u) {
        s += src0_ld(src0_at(unravel(i, p.src0.ne)));
    }
    partial[lid] = s;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (lid < w) { partial[lid] += partial[lid + w]; }
        workgroupBarrier();
    }
    if (lid == 0u) { dst_st(dst_off(), partial[0]); }
}
