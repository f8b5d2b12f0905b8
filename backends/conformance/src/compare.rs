//! Comparing a backend's result with the reference's (ggml's rules).

use super::Tolerance;

/// The outcome of one comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Close enough; the normalized mean squared error.
    Pass(f64),
    /// Not close enough, with why.
    Fail(String),
}

/// Compares `actual` with `expected` element by element: a NaN on either
/// side fails; infinities must match in sign on both sides (and are then
/// left out of the error); the rest must be equal (`Exact`) or have a
/// normalized mean squared error `sum((a - e)^2) / sum(e^2)` at most the
/// tolerance. An all-zero expectation is met only exactly.
pub fn compare(expected: &[f64], actual: &[f64], tolerance: Tolerance) -> Verdict {
    if tolerance == Tolerance::Exact
        && let Some((i, (e, a))) = expected.iter().zip(actual).enumerate().find(|(_, (e, a))| e != a && e.is_finite())
    {
        return Verdict::Fail(format!("index {i}: backend {a} != reference {e}"));
    }
    let err = match nmse(expected, actual) {
        Ok(err) => err,
        Err(why) => return Verdict::Fail(why),
    };
    match tolerance {
        Tolerance::Nmse(max) if err > max => Verdict::Fail(format!("NMSE {err:.3e} > {max:.1e}")),
        _ => Verdict::Pass(err),
    }
}

/// The normalized mean squared error `sum((a - e)^2) / sum(e^2)` of `actual`
/// against `expected` (test-backend-ops' `nmse`), under [`compare`]'s rules:
/// a NaN on either side or infinities that differ is an error (why), equal
/// infinities are left out, and an all-zero expectation gives 0 when met
/// exactly and infinity otherwise.
pub fn nmse(expected: &[f64], actual: &[f64]) -> Result<f64, String> {
    if expected.len() != actual.len() {
        return Err(format!("{} values, expected {}", actual.len(), expected.len()));
    }
    let (mut diff, mut norm) = (0f64, 0f64);
    for (i, (&e, &a)) in expected.iter().zip(actual).enumerate() {
        if a.is_nan() || e.is_nan() {
            return Err(format!("NaN at index {i} (backend {a}, reference {e})"));
        }
        if a.is_infinite() || e.is_infinite() {
            if a != e {
                return Err(format!("inf mismatch at index {i} (backend {a}, reference {e})"));
            }
            continue;
        }
        diff += (a - e) * (a - e);
        norm += e * e;
    }
    Ok(if norm == 0.0 { if diff == 0.0 { 0.0 } else { f64::INFINITY } } else { diff / norm })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Tolerance = Tolerance::Nmse(1e-7);

    #[test]
    fn rules() {
        assert_eq!(compare(&[1.0, 2.0], &[1.0, 2.0], Tolerance::Exact), Verdict::Pass(0.0));
        assert!(matches!(compare(&[1.0, 2.0], &[1.0, 2.001], T), Verdict::Fail(_)));
        assert!(matches!(compare(&[1.0, 2.0], &[1.0, 2.000_000_1], T), Verdict::Pass(_)));
        assert!(matches!(compare(&[1.0], &[1.000_000_1], Tolerance::Exact), Verdict::Fail(_)));
        assert!(matches!(compare(&[f64::NAN], &[f64::NAN], T), Verdict::Fail(_)), "NaN never passes");
        assert!(matches!(compare(&[1.0], &[f64::NAN], T), Verdict::Fail(_)));
        assert!(matches!(compare(&[f64::NEG_INFINITY, 1.0], &[f64::NEG_INFINITY, 1.0], T), Verdict::Pass(_)));
        assert!(matches!(compare(&[f64::NEG_INFINITY], &[f64::INFINITY], T), Verdict::Fail(_)));
        assert!(matches!(compare(&[f64::NEG_INFINITY], &[-1e30], T), Verdict::Fail(_)));
        assert!(matches!(compare(&[0.0, 0.0], &[0.0, 1e-20], T), Verdict::Fail(_)));
        assert!(matches!(compare(&[0.0], &[0.0], T), Verdict::Pass(_)));
        assert!(matches!(compare(&[1.0], &[1.0, 2.0], T), Verdict::Fail(_)));
    }
}
