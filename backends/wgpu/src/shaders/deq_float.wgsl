// deq8 for plain src0 dtypes: 8 elements from element k of the row starting
// at unit `row`, zeros past the row's end.

fn deq8(row: u32, k: u32) -> array<f32, 8> {
    var out: array<f32, 8>;
    if (k + 8u <= p.src0.ne.x) {
        for (var t = 0u; t < 8u; t++) { out[t] = src0_ld(row + (k + t) * p.src0.nb.x); }
    } else {
        for (var t = 0u; t < 8u; t++) {
            if (k + t < p.src0.ne.x) { out[t] = src0_ld(row + (k + t) * p.src0.nb.x); }
        }
    }
    return out;
}
