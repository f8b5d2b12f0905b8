// MUL_MAT_ID: dst[i01, e, t] = row i01 of expert ids[e, t] (src0, plain or
// quantized: `deq8`) . src1 row (e % ne11, t). A workgroup computes ROWS
// rows of one slot (e, t), LANES invocations per row each dequantizing
// chunks of 8, as mul_mat_vec.wgsl does for one column. The id is checked
// before any weight is read: a slot whose id is outside the experts reads
// nothing and is written as NaN (a kernel cannot fail; the CPU reports it).

const LANES: u32 = 16u;
const GROUP: u32 = ROWS * LANES;

var<workgroup> partial: array<f32, GROUP>;

@compute @workgroup_size(GROUP)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = flat_group(wid, nwg);
    let row_groups = (p.src0.ne.y + ROWS - 1u) / ROWS;
    if (g >= row_groups * p.dst.ne.y * p.dst.ne.z) { return; }
    let rg = g % row_groups;
    let slot = g / row_groups;
    let e = slot % p.dst.ne.y;
    let t = slot / p.dst.ne.y;
    let id = src2_ldi(src2_at(vec4<u32>(e, t, 0u, 0u)));
    let valid = id >= 0 && u32(id) < p.src0.ne.z;
    let r = lid / LANES;
    let lane = lid % LANES;
    let i01 = rg * ROWS + r;
    let ne00 = p.src0.ne.x;
    var acc = 0.0;
    if (valid && i01 < p.src0.ne.y) {
        let a_row = src0_at(vec4<u32>(0u, i01, u32(id), 0u));
        let b_row = src1_at(vec4<u32>(0u, e % p.src1.ne.y, t, 0u));
        let chunks = (ne00 + 7u) / 8u;
        for (var c = lane; c < chunks; c += LANES) {
            let k = c * 8u;
            let a = deq8(a_row, k);
            let b = b_row + k * p.src1.nb.x;
            for (var i = 0u; i < 8u; i++) {
                if (k + i < ne00) { acc += a[i] * src1_ld(b + i * p.src1.nb.x); }
            }
        }
    }
    partial[lid] = acc;
    workgroupBarrier();
    if (lane == 0u && i01 < p.src0.ne.y) {
        var s = 0.0;
        for (var l = 0u; l < LANES; l++) { s += partial[lid + l]; }
        dst_st(dst_at(vec4<u32>(i01, e, t, 0u)), select(bitcast<f32>(0x7fc00000u), s, valid));
    }
}
