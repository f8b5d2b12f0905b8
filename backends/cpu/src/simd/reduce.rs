//! Reductions of a row: sums accumulated in f64 (as ggml's), and the maximum.

use super::multiversion::multiversion;

multiversion! {
    /// The sum of `x`, accumulated in f64 (as ggml's `ggml_vec_sum_f32`).
    pub fn sum_f64(x: &[f32]) -> f64 {
        let mut acc = [0f64; 8];
        let c = x.chunks_exact(8);
        let r = c.remainder();
        for v in c {
            for i in 0..8 {
                acc[i] += v[i] as f64;
            }
        }
        acc.iter().sum::<f64>() + r.iter().map(|&v| v as f64).sum::<f64>()
    }
}

multiversion! {
    /// `sum((x[i] - shift)^2)`, accumulated in f64.
    pub fn sum_sq_f64(x: &[f32], shift: f32) -> f64 {
        let mut acc = [0f64; 8];
        let c = x.chunks_exact(8);
        let r = c.remainder();
        for v in c {
            for i in 0..8 {
                let d = (v[i] - shift) as f64;
                acc[i] += d * d;
            }
        }
        acc.iter().sum::<f64>() + r.iter().map(|&v| ((v - shift) as f64).powi(2)).sum::<f64>()
    }
}

multiversion! {
    /// The largest element (`-inf` for an empty slice; NaNs are skipped).
    pub fn max(x: &[f32]) -> f32 {
        let mut acc = [f32::NEG_INFINITY; 8];
        let c = x.chunks_exact(8);
        let r = c.remainder();
        for v in c {
            for i in 0..8 {
                acc[i] = acc[i].max(v[i]);
            }
        }
        r.iter().fold(acc.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)), |m, &v| m.max(v))
    }
}
