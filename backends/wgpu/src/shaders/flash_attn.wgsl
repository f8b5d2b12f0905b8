// FLASH_ATTN_EXT: softmax(Q K^T * scale (+ softcap) + slope * mask) V for one
// query row of one head per workgroup, over K/V in tiles of 64 positions with
// a running maximum (online softmax). src0 Q, src1 K, src2 V, src3 the mask
// (read through `mask_at`), src4 the heads' attention sinks (`sink_at`, -inf
// without them: a sink is one more logit with no value). p.f = (scale, max_bias, m0, m1), p.f2.x = softcap,
// p.u.x = n_head_log2. dst is [dv, n_head, n_q, ne3]. MAX_DK and MAX_DV,
// the longest Q/K and V rows, come from the plan (shared_constants.rs).

const WG: u32 = 64u;
// Output values of a V row each invocation keeps.
const V_PER_INVOCATION: u32 = MAX_DV / WG;

var<workgroup> q_row: array<f32, MAX_DK>;
var<workgroup> tile: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = flat_group(wid, nwg);
    let n_q = p.src0.ne.y;
    let n_head = p.src0.ne.z;
    if (g >= n_q * n_head * p.src0.ne.w) { return; }
    let iq1 = g % n_q;
    let rest = g / n_q;
    let iq2 = rest % n_head;
    let iq3 = rest / n_head;
    let dk = p.src0.ne.x;
    let dv = p.src2.ne.x;
    let n_kv = p.src1.ne.y;
    let ik2 = iq2 / (n_head / p.src1.ne.z);
    let neg_inf = bitcast<f32>(0xff800000u);

    let q_base = src0_at(vec4<u32>(0u, iq1, iq2, iq3));
    for (var d = lid; d < dk; d += WG) { q_row[d] = src0_ld(q_base + d * p.src0.nb.x); }
    workgroupBarrier();

    var slope = 1.0;
    if (p.f.y > 0.0) {
        let n_log2 = p.u.x;
        slope = select(pow(p.f.w, f32(2u * (iq2 - n_log2) + 1u)), pow(p.f.z, f32(iq2 + 1u)), iq2 < n_log2);
    }
    let k_base = src1_at(vec4<u32>(0u, 0u, ik2, iq3));
    let v_base = src2_at(vec4<u32>(0u, 0u, ik2, iq3));

    var m_run = neg_inf;
    var s_run = 0.0;
    var acc: array<f32, V_PER_INVOCATION>;
    for (var r = 0u; r < V_PER_INVOCATION; r++) { acc[r] = 0.0; }

    for (var kv0 = 0u; kv0 < n_kv; kv0 += WG) {
        let j = kv0 + lid;
        var s = neg_inf;
        if (j < n_kv) {
            let k_row = k_base + j * p.src1.nb.y;
            var dot_qk = 0.0;
            for (var d = 0u; d < dk; d++) { dot_qk += q_row[d] * src1_ld(k_row + d * p.src1.nb.x); }
            s = dot_qk * p.f.x;
            if (p.f2.x != 0.0) { s = p.f2.x * tanh(clamp(s / p.f2.x, -15.0, 15.0)); }
            s += slope * mask_at(vec4<u32>(j, iq1, iq2, iq3));
        }
        tile[lid] = s;
        workgroupBarrier();
        var m_tile = neg_inf;
        for (var u = 0u; u < WG; u++) { m_tile = max(m_tile, tile[u]); }
        let m_new = max(m_run, m_tile);
        workgroupBarrier();
        var e = 0.0;
        if (s != neg_inf) { e = exp(s - m_new); }
        tile[lid] = e;
        workgroupBarrier();
        var alpha = 0.0;
        if (m_run != neg_inf) { alpha = exp(m_run - m_new); }
        let count = min(WG, n_kv - kv0);
        var tile_sum = 0.0;
        for (var u = 0u; u < count; u++) { tile_sum += tile[u]; }
        s_run = s_run * alpha + tile_sum;
        for (var r = 0u; r < V_PER_INVOCATION; r++) {
            let c = lid + r * WG;
            if (c < dv) {
                var a = acc[r] * alpha;
                for (var u = 0u; u < count; u++) {
                    a += tile[u] * src2_ld(v_base + (kv0 + u) * p.src2.nb.y + c * p.src2.nb.x);
                }
                acc[r] = a;
            }
        }
        m_run = m_new;
        workgroupBarrier();
    }
    // The sink as a new maximum rescales what was accumulated; its weight joins the sum.
    let sink = sink_at(iq2);
    if (sink != neg_inf) {
        if (sink > m_run) {
            var rescale = 0.0;
            if (m_run != neg_inf) { rescale = exp(m_run - sink); }
            s_run *= rescale;
            for (var r = 0u; r < V_PER_INVOCATION; r++) { acc[r] *= rescale; }
            m_run = sink;
        }
        s_run += exp(sink - m_run);
    }
    var inv = 0.0;
    if (s_run != 0.0) { inv = 1.0 / s_run; }
    for (var r = 0u; r < V_PER_INVOCATION; r++) {
        let c = lid + r * WG;
        if (c < dv) { dst_st(dst_at(vec4<u32>(c, iq2, iq1, iq3)), acc[r] * inv); }
    }
}
