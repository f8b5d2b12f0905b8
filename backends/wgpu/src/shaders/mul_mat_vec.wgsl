// MUL_MAT for few src1 columns (at most MAX_COLS): dst[i01, i11, i12, i13] =
// src0 row i01 (of batch i12 / r2, i13 / r3) . src1 row (i11, i12, i13).
// A workgroup of GROUP invocations computes ROWS rows for every column of one
// batch: LANES invocations share a row, each dequantizing chunks of 8
// elements once (`deq8`) and using them for every column; after one barrier
// the row's first invocation adds the LANES partial sums (one barrier rather
// than a tree of them: barriers are what software rasterizers like lavapipe
// pay most for). ROWS and MAX_COLS come from the plan (shared_constants.rs).

const LANES: u32 = 16u;
const GROUP: u32 = ROWS * LANES;

var<workgroup> partial: array<f32, MAX_COLS * GROUP>; // [MAX_COLS][GROUP]

@compute @workgroup_size(GROUP)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = flat_group(wid, nwg);
    let row_groups = (p.src0.ne.y + ROWS - 1u) / ROWS;
    if (g >= row_groups * p.src1.ne.z * p.src1.ne.w) { return; }
    let rg = g % row_groups;
    let rest = g / row_groups;
    let i12 = rest % p.src1.ne.z;
    let i13 = rest / p.src1.ne.z;
    let r = lid / LANES;
    let lane = lid % LANES;
    let i01 = rg * ROWS + r;
    let ne00 = p.src0.ne.x;
    let cols = min(p.src1.ne.y, MAX_COLS);
    var acc: array<f32, MAX_COLS>;
    if (i01 < p.src0.ne.y) {
        let r2 = p.src1.ne.z / p.src0.ne.z;
        let r3 = p.src1.ne.w / p.src0.ne.w;
        let a_row = src0_at(vec4<u32>(0u, i01, i12 / r2, i13 / r3));
        let chunks = (ne00 + 7u) / 8u;
        for (var c = lane; c < chunks; c += LANES) {
            let k = c * 8u;
            let a = deq8(a_row, k);
            let full = k + 8u <= ne00;
            for (var col = 0u; col < cols; col++) {
                let b = src1_at(vec4<u32>(k, col, i12, i13));
                var s = 0.0;
                // Fixed trip counts let compilers unroll and keep `a` in registers.
                if (full) {
                    for (var t = 0u; t < 8u; t++) { s += a[t] * src1_ld(b + t * p.src1.nb.x); }
                } else {
                    for (var t = 0u; t < 8u; t++) {
                        if (k + t < ne00) { s += a[t] * src1_ld(b + t * p.src1.nb.x); }
                    }
                }
                acc[col] += s;
            }
        }
    }
    for (var col = 0u; col < MAX_COLS; col++) { partial[col * GROUP + lid] = acc[col]; }
    workgroupBarrier();
    // One barrier, then the row's first lane adds the row's partial sums.
    if (lane == 0u && i01 < p.src0.ne.y) {
        for (var col = 0u; col < cols; col++) {
            var s = 0.0;
            for (var l = 0u; l < LANES; l++) { s += partial[col * GROUP + lid + l]; }
            dst_st(dst_at(vec4<u32>(i01, col, i12, i13)), s);
        }
    }
}
