//! Reductions in f64: SUM, SUM_ROWS, MEAN, ARGMAX.

use super::Array;

/// The sum of all elements.
pub fn sum(a: &Array) -> Result<Array, String> {
    Ok(Array { ne: [1, 1, 1, 1], data: vec![a.data.iter().sum()] })
}

fn per_row(a: &Array, f: impl Fn(&[f64]) -> f64) -> Array {
    let ne = [1, a.ne[1], a.ne[2], a.ne[3]];
    Array { ne, data: a.data.chunks(a.ne[0].max(1)).map(f).collect() }
}

/// The sum of each row.
pub fn sum_rows(a: &Array) -> Result<Array, String> {
    Ok(per_row(a, |r| r.iter().sum()))
}

/// The mean of each row.
pub fn mean(a: &Array) -> Result<Array, String> {
    Ok(per_row(a, |r| r.iter().sum::<f64>() / r.len() as f64))
}

/// The index of the first largest element of each row of a matrix.
pub fn argmax(a: &Array) -> Result<Array, String> {
    let mut data = Vec::with_capacity(a.ne[1]);
    for row in a.data.chunks(a.ne[0].max(1)) {
        let mut best = 0;
        for (i, &v) in row.iter().enumerate() {
            if v > row[best] {
                best = i;
            }
        }
        data.push(best as f64);
    }
    Ok(Array { ne: [a.ne[1], 1, 1, 1], data })
}
