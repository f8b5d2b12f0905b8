//! How ARGSORT and TOP_K results are measured: by the values their indices
//! pick. ggml leaves the order of ties unspecified (and TOP_K's order
//! altogether; test-backend-ops compares its index sets), so two correct
//! results may hold different indices but never pick different values.

/// The normalized mean squared error between the values `ggml`'s and
/// `gantry`'s indices pick from `values` (rows of `row_len` elements in
/// logical order), row by row: in order when `ordered` (ARGSORT), else as
/// sorted sets (TOP_K). Indices out of range or repeated within a row are
/// an error.
pub fn sort_error(k: usize, ordered: bool, values: &[f32], ggml: &[f64], gantry: &[f64]) -> Result<f64, String> {
    if ggml.len() != gantry.len() || k == 0 || !ggml.len().is_multiple_of(k) {
        return Err(format!("{} indices from Gantry, {} from ggml, rows of {k}", gantry.len(), ggml.len()));
    }
    let rows = ggml.len() / k;
    if rows == 0 || !values.len().is_multiple_of(rows) {
        return Err(format!("{} values for {rows} rows", values.len()));
    }
    let row_len = values.len() / rows;
    let picked = |indices: &[f64], row: usize, who: &str| -> Result<Vec<f64>, String> {
        let src = &values[row * row_len..(row + 1) * row_len];
        let mut seen = vec![false; row_len];
        let mut out = Vec::with_capacity(k);
        for &i in indices {
            let at = i as usize;
            if i < 0.0 || i.fract() != 0.0 || at >= row_len || std::mem::replace(&mut seen[at], true) {
                return Err(format!("{who}'s row {row} holds index {i} (row of {row_len}, or repeated)"));
            }
            out.push(f64::from(src[at]));
        }
        if !ordered {
            out.sort_by(f64::total_cmp);
        }
        Ok(out)
    };
    let (mut a, mut b) = (Vec::with_capacity(ggml.len()), Vec::with_capacity(ggml.len()));
    for row in 0..rows {
        a.extend(picked(&ggml[row * k..(row + 1) * k], row, "ggml")?);
        b.extend(picked(&gantry[row * k..(row + 1) * k], row, "Gantry")?);
    }
    crate::compare::nmse(&a, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_and_order() {
        let values = [3.0, 1.0, 3.0, 2.0];
        // ARGSORT descending, the tie broken either way.
        assert_eq!(sort_error(4, true, &values, &[0.0, 2.0, 3.0, 1.0], &[2.0, 0.0, 3.0, 1.0]), Ok(0.0));
        // TOP_K in any order.
        assert_eq!(sort_error(2, false, &values, &[0.0, 2.0], &[2.0, 0.0]), Ok(0.0));
        assert_eq!(sort_error(4, false, &values, &[0.0, 2.0, 3.0, 1.0], &[3.0, 1.0, 2.0, 0.0]), Ok(0.0));
        assert!(sort_error(4, true, &values, &[0.0, 2.0, 3.0, 1.0], &[3.0, 1.0, 2.0, 0.0]).unwrap() > 0.0);
        assert!(sort_error(2, false, &values, &[0.0, 3.0], &[2.0, 0.0]).unwrap() > 0.0);
        assert!(sort_error(2, false, &values, &[0.0, 0.0], &[2.0, 0.0]).is_err(), "a repeated index");
        assert!(sort_error(2, false, &values, &[0.0, 4.0], &[2.0, 0.0]).is_err(), "out of range");
    }
}
