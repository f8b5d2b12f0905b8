// The small index ops: one invocation per result element, the function
// picked by INDEX_OP (the order of `kernels::small::IndexOp`). Each reads
// at most one element of src0 (and ADD1 the one element of src1) at a
// position inside src0's shape; the plan checked the shapes.
// u.x: TRI's kind (ggml's order) / DIAG_MASK_ZERO's n_past / PAD_REFLECT_1D's p0
// / TIMESTEP_EMBEDDING's dim / 2;
// u2: ROLL's shifts (i32 bits, each already in 0..ne).
// f: FILL's value / ARANGE's start and step / XIELU's alpha_n, alpha_p, beta, eps
// / TIMESTEP_EMBEDDING's ln(max_period).
// `src0_value(c)` and `src1_first()` come with the instance: 0 where the
// op binds no such source (every case compiles, whichever one runs).

fn tri_keeps(kind: u32, i0: u32, i1: u32) -> bool {
    switch (kind) {
        case 0u: { return i0 >= i1; }
        case 1u: { return i0 > i1; }
        case 2u: { return i0 <= i1; }
        default: { return i0 < i1; }
    }
}

fn xielu(x: f32) -> f32 {
    if (x > 0.0) { return p.f.y * x * x + p.f.z * x; }
    return (expm1_accurate(min(x, p.f.w)) - x) * p.f.x + p.f.z * x;
}

fn index_value(c: vec4<u32>) -> f32 {
    switch (INDEX_OP) {
        case 0u: { return p.f.x; } // FILL
        case 1u: { return select(0.0, src0_value(c), tri_keeps(p.u.x, c.x, c.y)); } // TRI
        case 2u: { // DIAG
            if (c.x != c.y) { return 0.0; }
            return src0_value(vec4<u32>(c.y, 0u, c.z, c.w));
        }
        case 3u: { return select(src0_value(c), 0.0, c.x > p.u.x + c.y); } // DIAG_MASK_ZERO
        case 4u: { return src0_value(c) + src1_first(); } // ADD1
        // The element `shift` places back, wrapped (each shift in 0..ne).
        case 5u: { // ROLL
            let n = p.src0.ne;
            return src0_value((c + n - p.u2) % n);
        }
        // p0 and p1 are shorter than the row.
        case 6u: { // PAD_REFLECT_1D
            let p0 = p.u.x;
            let m0 = p.src0.ne.x;
            var j = 0u;
            if (c.x < p0) { j = p0 - c.x; } else if (c.x - p0 < m0) { j = c.x - p0; } else { j = 2u * (m0 - 1u) - (c.x - p0); }
            return src0_value(vec4<u32>(j, c.y, c.z, c.w));
        }
        case 7u: { return p.f.x + p.f.y * f32(c.x); } // ARANGE
        // Cosines then sines of t · max_period^(-j / half); an odd last element is 0.
        case 9u: { // TIMESTEP_EMBEDDING
            let half = p.u.x;
            if (c.x >= 2u * half) { return 0.0; }
            let arg = src0_value(vec4<u32>(c.y, 0u, 0u, 0u)) * exp(-p.f.x * f32(c.x % half) / f32(half));
            return select(sin(arg), cos(arg), c.x < half);
        }
        case 8u, default: { return xielu(src0_value(c)); } // XIELU
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * WORKGROUP_SIZE + lid;
    if (i >= n_elements(p.dst.ne)) { return; }
    let c = unravel(i, p.dst.ne);
    dst_st(dst_at(c), index_value(c));
}
