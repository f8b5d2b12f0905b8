// Quantizing CPY / SET_ROWS: one invocation turns 32 f32 values of src0 into
// one block of dst (ggml's reference quantizers, `quantize_block` below).
// `dst_row(c)` is the byte offset of the dst row for src0 row (c.y, c.z, c.w):
// the same row in order for CPY, the indexed row for SET_ROWS (or
// 0xffffffff for an index out of range, which is skipped).

fn f16_bits(v: f32) -> u32 { return pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu; }

// C's roundf: halves away from zero (WGSL's round goes to even).
fn round_away(v: f32) -> f32 { return sign(v) * floor(abs(v) + 0.5); }

// The block's bytes, written two at a time (blocks start at even offsets).
var<private> out_bytes: array<u32, 34>;

fn put_block(base: u32, n: u32) {
    for (var i = 0u; i < n; i += 2u) {
        dst_st16(base + i, out_bytes[i] | (out_bytes[i + 1u] << 8u));
    }
}

fn put_f16(at: u32, v: f32) {
    let h = f16_bits(v);
    out_bytes[at] = h & 0xffu;
    out_bytes[at + 1u] = h >> 8u;
}

fn quantize_block(x: ptr<function, array<f32, 32>>, base: u32) {
    var amax = 0.0;
    var vmax = 0.0;
    var lo = (*x)[0];
    var hi = (*x)[0];
    for (var j = 0u; j < 32u; j++) {
        let v = (*x)[j];
        if (amax < abs(v)) { amax = abs(v); vmax = v; }
        lo = min(lo, v);
        hi = max(hi, v);
    }
    switch QTYPE {
        case 0u: { // Q4_0: 18 bytes
            let d = vmax / -8.0;
            let id = select(0.0, 1.0 / d, d != 0.0);
            put_f16(0u, d);
            for (var j = 0u; j < 16u; j++) {
                let a = min(15u, u32((*x)[j] * id + 8.5));
                let b = min(15u, u32((*x)[j + 16u] * id + 8.5));
                out_bytes[2u + j] = a | (b << 4u);
            }
            put_block(base, 18u);
        }
        case 1u: { // Q4_1: 20 bytes
            let d = (hi - lo) / 15.0;
            let id = select(0.0, 1.0 / d, d != 0.0);
            put_f16(0u, d);
            put_f16(2u, lo);
            for (var j = 0u; j < 16u; j++) {
                let a = min(15u, u32(((*x)[j] - lo) * id + 0.5));
                let b = min(15u, u32(((*x)[j + 16u] - lo) * id + 0.5));
                out_bytes[4u + j] = a | (b << 4u);
            }
            put_block(base, 20u);
        }
        case 2u: { // Q5_0: 22 bytes
            let d = vmax / -16.0;
            let id = select(0.0, 1.0 / d, d != 0.0);
            put_f16(0u, d);
            var qh = 0u;
            for (var j = 0u; j < 16u; j++) {
                let a = min(31u, u32((*x)[j] * id + 16.5));
                let b = min(31u, u32((*x)[j + 16u] * id + 16.5));
                out_bytes[6u + j] = (a & 0xfu) | ((b & 0xfu) << 4u);
                qh |= ((a >> 4u) & 1u) << j;
                qh |= ((b >> 4u) & 1u) << (j + 16u);
            }
            for (var t = 0u; t < 4u; t++) { out_bytes[2u + t] = (qh >> (8u * t)) & 0xffu; }
            put_block(base, 22u);
        }
        case 3u: { // Q5_1: 24 bytes
            let d = (hi - lo) / 31.0;
            let id = select(0.0, 1.0 / d, d != 0.0);
            put_f16(0u, d);
            put_f16(2u, lo);
            var qh = 0u;
            for (var j = 0u; j < 16u; j++) {
                let a = u32(((*x)[j] - lo) * id + 0.5) & 0xffu;
                let b = u32(((*x)[j + 16u] - lo) * id + 0.5) & 0xffu;
                out_bytes[8u + j] = (a & 0xfu) | ((b & 0xfu) << 4u);
                qh |= ((a >> 4u) & 1u) << j;
                qh |= ((b >> 4u) & 1u) << (j + 16u);
            }
            for (var t = 0u; t < 4u; t++) { out_bytes[4u + t] = (qh >> (8u * t)) & 0xffu; }
            put_block(base, 24u);
        }
        default: { // Q8_0: 34 bytes
            let d = amax / 127.0;
            let id = select(0.0, 1.0 / d, d != 0.0);
            put_f16(0u, d);
            for (var j = 0u; j < 32u; j++) {
                out_bytes[2u + j] = u32(i32(round_away((*x)[j] * id))) & 0xffu;
            }
            put_block(base, 34u);
        }
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    let blocks = p.src0.ne.x / 32u;
    let shape = vec4<u32>(blocks, p.src0.ne.y, p.src0.ne.z, p.src0.ne.w);
    if (i >= n_elements(shape)) { return; }
    let c = unravel(i, shape);
    let row = dst_row(c);
    if (row == 0xffffffffu) { return; }
    var x: array<f32, 32>;
    for (var j = 0u; j < 32u; j++) { x[j] = src0_ld(src0_at(vec4<u32>(c.x * 32u + j, c.y, c.z, c.w))); }
    quantize_block(&x, row + c.x * p.dst.nb.x);
}
