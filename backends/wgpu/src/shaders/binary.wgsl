// ADD, SUB, MUL, DIV with src1 repeated over src0 (BIN_OP selects).

fn bin_value(a: f32, b: f32) -> f32 {
    switch BIN_OP {
        case 0u: { return a + b; }
        case 1u: { return a - b; }
        case 2u: { return a * b; }
        default: { return a / b; }
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    let a = src0_ld(src0_at(c));
    let b = src1_ld(src1_at(c % p.src1.ne));
    dst_st(dst_at(c), bin_value(a, b));
}
