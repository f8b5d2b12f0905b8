//! MUL_MAT in f64.

use super::Array;

/// `out[i, j, b2, b3] = sum_p a[p, i, b2 / r2, b3 / r3] * b[p, j, b2, b3]`,
/// with `r2 = b.ne2 / a.ne2` and `r3 = b.ne3 / a.ne3` (the broadcast).
pub fn mul_mat(a: &Array, b: &Array) -> Result<Array, String> {
    if a.ne[0] != b.ne[0] || !b.ne[2].is_multiple_of(a.ne[2]) || !b.ne[3].is_multiple_of(a.ne[3]) {
        return Err(format!("{:?} x {:?}", a.ne, b.ne));
    }
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    let ne = [a.ne[1], b.ne[1], b.ne[2], b.ne[3]];
    let mut out = Array::filled(ne, 0.0);
    for [i, j, b2, b3] in Array::indices(ne) {
        let sum: f64 = (0..a.ne[0]).map(|p| a.at([p, i, b2 / r2, b3 / r3]) * b.at([p, j, b2, b3])).sum();
        out.set([i, j, b2, b3], sum);
    }
    Ok(out)
}
