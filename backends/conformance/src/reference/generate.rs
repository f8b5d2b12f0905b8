//! Ops that make values, in f64: ARANGE and TIMESTEP_EMBEDDING.

use super::Array;

/// ARANGE: `start + step · i` for the result's `n` elements.
pub fn arange(start: f64, step: f64, n: usize) -> Result<Array, String> {
    Ok(Array { ne: [n, 1, 1, 1], data: (0..n).map(|i| start + step * i as f64).collect() })
}

/// TIMESTEP_EMBEDDING: row `i` is `cos(t_i f_j)` for `j < dim / 2`, then
/// `sin(t_i f_j)`, then 0 when `dim` is odd; `f_j = max_period^(-j / half)`.
pub fn timestep_embedding(t: &Array, dim: usize, max_period: f64) -> Result<Array, String> {
    let half = dim / 2;
    let mut out = Array::filled([dim, t.ne[0], 1, 1], 0.0);
    for i in 0..t.ne[0] {
        for j in 0..half {
            let arg = t.at([i, 0, 0, 0]) * max_period.powf(-(j as f64) / half as f64);
            out.set([j, i, 0, 0], arg.cos());
            out.set([j + half, i, 0, 0], arg.sin());
        }
    }
    Ok(out)
}
