// ARGSORT and TOP_K by rank: one invocation per source element counts the
// elements of its row that sort before it (by value in the order p.u.x, 1
// descending, ties by index, NaNs by their bits as f32::total_cmp does), so
// the ranks of a row are a permutation and each element writes its own
// index at its rank; TOP_K writes only ranks below k (dst.ne.x). Quadratic
// in the row length: the plan bounds it.

// The f32's bits as an unsigned integer in the value's total order.
fn sort_key(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.src0.ne)) { return; }
    let c = unravel(i, p.src0.ne);
    let n = p.src0.ne.x;
    let row = src0_at(vec4<u32>(0u, c.y, c.z, c.w));
    let mine = sort_key(src0_ld(row + c.x * p.src0.nb.x));
    let desc = p.u.x != 0u;
    var rank = 0u;
    for (var j = 0u; j < n; j++) {
        let other = sort_key(src0_ld(row + j * p.src0.nb.x));
        let ahead = select((other < mine), (other > mine), desc);
        if (ahead || (other == mine && j < c.x)) { rank += 1u; }
    }
    if (rank < p.dst.ne.x) {
        dst_sti(dst_at(vec4<u32>(rank, c.y, c.z, c.w)), i32(c.x));
    }
}
