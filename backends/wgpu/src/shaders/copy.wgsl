// CPY / CONT / DUP: element i of src0 in logical order goes to element i of
// dst in logical order (the shapes may differ, the counts agree), converting
// the dtype. `mov0(d, s)` moves one element (an integer move for I32).

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    mov0(dst_at(unravel(i, p.dst.ne)), src0_at(unravel(i, p.src0.ne)));
}
