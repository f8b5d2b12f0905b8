//! SOLVE_TRI in f64: forward substitution per column of each batch.

use super::Array;

/// `X` with `a X = b`, `a` lower triangular (entry `[t, i]` in row `i`).
pub fn solve_tri(a: &Array, b: &Array) -> Result<Array, String> {
    let mut x = Array::filled(b.ne, 0.0);
    let n = a.ne[0];
    for i3 in 0..b.ne[3] {
        for i2 in 0..b.ne[2] {
            for col in 0..b.ne[0] {
                for i in 0..n {
                    let sum: f64 = (0..i).map(|j| a.at([j, i, i2, i3]) * x.at([col, j, i2, i3])).sum();
                    x.set([col, i, i2, i3], (b.at([col, i, i2, i3]) - sum) / a.at([i, i, i2, i3]));
                }
            }
        }
    }
    Ok(x)
}
