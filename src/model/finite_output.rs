//! A model's output checked before it is handed on: weights that hold NaN
//! or infinities (a damaged or badly converted file), or activations that
//! overflow, give logits and embeddings that are not numbers, and a sampler
//! or a cosine would turn them into a confident wrong answer. Gantry refuses
//! them instead, naming the row and the column. The check reads the output
//! once (a few microseconds for a row of logits beside milliseconds of
//! compute).

use crate::{Error, Result};

/// `Err` naming the first value of `values` that is not finite: its row of
/// `row_len` values and its column, with `what` the output (`"logits"`,
/// `"embeddings"`) and `column` what a column is (`"token id"`, `"dimension"`).
pub(crate) fn ensure_finite(values: &[f32], row_len: usize, what: &str, column: &str) -> Result<()> {
    // A plain all() vectorizes; the position is looked for only on failure.
    if values.iter().all(|v| v.is_finite()) {
        return Ok(());
    }
    let at = values.iter().position(|v| !v.is_finite()).unwrap_or(0);
    let row_len = row_len.max(1);
    Err(Error::Model(format!(
        "the model's {what} are not numbers ({} at row {}, {column} {}): its weights hold NaN or infinity, \
         or its activations overflowed",
        values[at],
        at / row_len,
        at % row_len
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_value_that_is_not_a_number_is_named() {
        assert!(ensure_finite(&[0.0, -1e30, 3.5], 3, "logits", "token id").is_ok());
        let e = ensure_finite(&[0.0, 1.0, 2.0, 3.0, f32::NAN, f32::INFINITY], 3, "logits", "token id").unwrap_err();
        assert!(e.to_string().contains("NaN at row 1, token id 1"), "{e}");
        let e = ensure_finite(&[f32::NEG_INFINITY], 0, "embeddings", "dimension").unwrap_err();
        assert!(e.to_string().contains("-inf at row 0, dimension 0"), "{e}");
    }
}
