// MUL_MAT for many src1 columns: tiles of 64 src0 rows x 64 src1 rows per
// workgroup, 32 elements of K at a time staged in shared memory (src0
// dequantized on the way in by `deq8`), each invocation accumulating a
// 4 x 4 block of the result in registers.

const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 32u;

var<workgroup> a_tile: array<f32, 2048>; // [BK][BM]
var<workgroup> b_tile: array<f32, 2048>; // [BK][BN]

@compute @workgroup_size(256)
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

    // Loading: invocation lid fills 8 consecutive K of row (lid / 4) of each tile.
    let lr = lid / 4u;
    let lk = (lid % 4u) * 8u;
    let a_ok = m0 + lr < ne01;
    let b_ok = n0 + lr < ne11;
    let a_row = src0_at(vec4<u32>(0u, min(m0 + lr, ne01 - 1u), i12 / r2, i13 / r3));
    let b_row = src1_at(vec4<u32>(0u, min(n0 + lr, ne11 - 1u), i12, i13));

    // Computing: invocation (tx, ty) owns rows tx + 16 i and columns ty + 16 j.
    let tx = lid % 16u;
    let ty = lid / 16u;
    var acc: array<vec4<f32>, 4>;
    for (var i = 0u; i < 4u; i++) { acc[i] = vec4<f32>(0.0); }

    for (var k0 = 0u; k0 < ne00; k0 += BK) {
        let k = k0 + lk;
        var a: array<f32, 8>;
        if (a_ok && k < ne00) { a = deq8(a_row, k); }
        for (var t = 0u; t < 8u; t++) {
            a_tile[(lk + t) * BM + lr] = a[t];
            var b = 0.0;
            if (b_ok && k + t < ne00) { b = src1_ld(b_row + (k + t) * p.src1.nb.x); }
            b_tile[(lk + t) * BN + lr] = b;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            let ab = kk * BM + tx;
            let bb = kk * BN + ty;
            let av = vec4<f32>(a_tile[ab], a_tile[ab + 16u], a_tile[ab + 32u], a_tile[ab + 48u]);
            let bv = vec4<f32>(b_tile[bb], b_tile[bb + 16u], b_tile[bb + 32u], b_tile[bb + 48u]);
            acc[0] += av.x * bv;
            acc[1] += av.y * bv;
            acc[2] += av.z * bv;
            acc[3] += av.w * bv;
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let m = m0 + tx + 16u * i;
        for (var j = 0u; j < 4u; j++) {
            let n = n0 + ty + 16u * j;
            if (m < ne01 && n < ne11) { dst_st(dst_at(vec4<u32>(m, n, i12, i13)), acc[i][j]); }
        }
    }
}
