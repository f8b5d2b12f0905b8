// COUNT_EQUAL: one workgroup counts the positions where the I32 src0 and
// src1 (same shape) are equal, into the one I32 element of dst. The plan
// keeps the count below 2^31 (the builder refuses larger inputs).

var<workgroup> partial: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    let n = n_elements(p.src0.ne);
    var count = 0u;
    for (var i = lid; i < n; i += 256u) {
        let c = unravel(i, p.src0.ne);
        count += select(0u, 1u, src0_ldi(src0_at(c)) == src1_ldi(src1_at(c)));
    }
    partial[lid] = count;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (lid < w) { partial[lid] += partial[lid + w]; }
        workgroupBarrier();
    }
    if (lid == 0u) { dst_sti(dst_off(), i32(partial[0])); }
}
