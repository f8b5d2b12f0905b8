// MUL_MAT for many src1 columns: tiles of BM src0 rows x BN src1 rows per
// workgroup of 64 invocations, BK elements of K at a time staged in shared
// memory (src0 dequantized on the way in by `deq8`); each invocation keeps
// an 8 x 8 block of the result in registers. BM and BN come from the plan
// (shared_constants.rs), which keeps them at 64: one tile row per invocation.

const BK: u32 = 32u;

var<workgroup> a_tile: array<f32, BK * BM>; // [BK][BM]
var<workgroup> b_tile: array<f32, BK * BN>; // [BK][BN]

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = flat_group(wid, nwg);
    let ne00 = p.src0.ne.x;
    let ne01 = p.src0.ne.y;
    let ne11 = p.src1.ne.y;
    let tiles_m = (ne01 + BM - 1u) / BM;
    let tiles_n = (ne11 + BN - 1u) / BN;
    if (g >= tiles_m * tiles_n * p.src1.ne.z * p.src1.ne.w) { return; }
    let tm = g % tiles_m;
    let rest = g / tiles_m;
    let tn = rest % tiles_n;
    let rest2 = rest / tiles_n;
    let i12 = rest2 % p.src1.ne.z;
    let i13 = rest2 / p.src1.ne.z;
    let m0 = tm * BM;
    let n0 = tn * BN;
    let r2 = p.src1.ne.z / p.src0.ne.z;
    let r3 = p.src1.ne.w / p.src0.ne.w;

    // Loading: invocation lid fills row lid of both tiles (32 elements of K each).
    let a_ok = m0 + lid < ne01;
    let b_ok = n0 + lid < ne11;
    let a_row = src0_at(vec4<u32>(0u, min(m0 + lid, ne01 - 1u), i12 / r2, i13 / r3));
    let b_row = src1_at(vec4<u32>(0u, min(n0 + lid, ne11 - 1u), i12, i13));

    // Computing: invocation (tx, ty) owns rows tx + 8 i and columns ty + 8 j.
    let tx = lid % 8u;
    let ty = lid / 8u;
    var acc: array<vec4<f32>, 16>; // row i: columns 0-3 in acc[2i], 4-7 in acc[2i + 1]

    for (var k0 = 0u; k0 < ne00; k0 += BK) {
        for (var c = 0u; c < BK; c += 8u) {
            let k = k0 + c;
            var a: array<f32, 8>;
            if (a_ok && k < ne00) { a = deq8(a_row, k); }
            for (var t = 0u; t < 8u; t++) {
                a_tile[(c + t) * BM + lid] = a[t];
                var b = 0.0;
                if (b_ok && k + t < ne00) { b = src1_ld(b_row + (k + t) * p.src1.nb.x); }
                b_tile[(c + t) * BN + lid] = b;
            }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            let ab = kk * BM + tx;
            let bb = kk * BN + ty;
            let b_lo = vec4<f32>(b_tile[bb], b_tile[bb + 8u], b_tile[bb + 16u], b_tile[bb + 24u]);
            let b_hi = vec4<f32>(b_tile[bb + 32u], b_tile[bb + 40u], b_tile[bb + 48u], b_tile[bb + 56u]);
            for (var i = 0u; i < 8u; i++) {
                let av = a_tile[ab + 8u * i];
                acc[2u * i] += av * b_lo;
                acc[2u * i + 1u] += av * b_hi;
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 8u; i++) {
        let m = m0 + tx + 8u * i;
        for (var j = 0u; j < 8u; j++) {
            let n = n0 + ty + 8u * j;
            if (m < ne01 && n < ne11) { dst_st(dst_at(vec4<u32>(m, n, i12, i13)), acc[2u * i + j / 4u][j % 4u]); }
        }
    }
}
