//! Row-wise normalizations in f64: NORM, RMS_NORM, SOFT_MAX, DIAG_MASK_INF.

use super::{Array, alibi_slope};

fn rows_mut(a: &mut Array) -> std::slice::ChunksMut<'_, f64> {
    let n = a.ne[0].max(1);
    a.data.chunks_mut(n)
}

/// `(x - mean) / sqrt(variance + eps)` per row.
pub fn norm(a: &Array, eps: f64) -> Result<Array, String> {
    let mut out = a.clone();
    for row in rows_mut(&mut out) {
        let n = row.len() as f64;
        let mean = row.iter().sum::<f64>() / n;
        let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        row.iter_mut().for_each(|x| *x = (*x - mean) / (var + eps).sqrt());
    }
    Ok(out)
}

/// `x / sqrt(mean(x^2) + eps)` per row.
pub fn rms_norm(a: &Array, eps: f64) -> Result<Array, String> {
    let mut out = a.clone();
    for row in rows_mut(&mut out) {
        let ms = row.iter().map(|x| x * x).sum::<f64>() / row.len() as f64;
        row.iter_mut().for_each(|x| *x /= (ms + eps).sqrt());
    }
    Ok(out)
}

/// `softmax(x * scale + slope(head) * mask)` per row; the mask row is
/// `mask[:, i1, i2 % m2, i3 % m3]`, the head is `i2`. A head's sink
/// `sinks[i2]` joins the row's sum as one more logit without an output. A
/// row whose logits are all `-inf` (and no sink) becomes zeros.
pub fn soft_max(
    a: &Array,
    mask: Option<&Array>,
    sinks: Option<&Array>,
    scale: f64,
    max_bias: f64,
) -> Result<Array, String> {
    let mut out = a.clone();
    let [n0, n1, n2, n3] = a.ne;
    for i3 in 0..n3 {
        for i2 in 0..n2 {
            let slope = alibi_slope(max_bias, i2, n2);
            for i1 in 0..n1 {
                let mut w: Vec<f64> = (0..n0).map(|i0| a.at([i0, i1, i2, i3]) * scale).collect();
                if let Some(m) = mask {
                    for (i0, v) in w.iter_mut().enumerate() {
                        *v += slope * m.at([i0, i1, i2 % m.ne[2], i3 % m.ne[3]]);
                    }
                }
                let sink = sinks.map(|k| k.at([i2, 0, 0, 0]));
                let max = w.iter().cloned().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                if max == f64::NEG_INFINITY {
                    w.iter_mut().for_each(|v| *v = 0.0);
                } else {
                    let sum: f64 = w.iter().cloned().chain(sink).map(|v| (v - max).exp()).sum();
                    w.iter_mut().for_each(|v| *v = (*v - max).exp() / sum);
                }
                for (i0, v) in w.into_iter().enumerate() {
                    out.set([i0, i1, i2, i3], v);
                }
            }
        }
    }
    Ok(out)
}

/// `-inf` at every column `i0 > n_past + i1`.
pub fn diag_mask_inf(a: &Array, n_past: usize) -> Result<Array, String> {
    let mut out = a.clone();
    for i in Array::indices(a.ne) {
        if i[0] > n_past + i[1] {
            out.set(i, f64::NEG_INFINITY);
        }
    }
    Ok(out)
}

/// `x / max(sqrt(sum(x^2)), eps)` per row.
pub fn l2_norm(a: &Array, eps: f64) -> Result<Array, String> {
    let mut out = a.clone();
    for row in rows_mut(&mut out) {
        let norm = row.iter().map(|x| x * x).sum::<f64>().sqrt().max(eps);
        row.iter_mut().for_each(|x| *x /= norm);
    }
    Ok(out)
}

/// `(x - mean) / sqrt(var + eps)` over each group of `ceil(C / n_groups)`
/// channels (dim 2) of each sample (dim 3).
pub fn group_norm(a: &Array, n_groups: usize, eps: f64) -> Result<Array, String> {
    let [n0, n1, channels, samples] = a.ne;
    let per_group = channels.div_ceil(n_groups.max(1));
    let mut out = a.clone();
    for n in 0..samples {
        for g in 0..n_groups {
            let cs = (g * per_group).min(channels)..((g + 1) * per_group).min(channels);
            let at = |c: usize, k: usize| [k % n0, k / n0, c, n];
            let values: Vec<f64> = cs.clone().flat_map(|c| (0..n0 * n1).map(move |k| a.at(at(c, k)))).collect();
            if values.is_empty() {
                continue;
            }
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / values.len() as f64;
            for c in cs {
                for k in 0..n0 * n1 {
                    out.set(at(c, k), (a.at(at(c, k)) - mean) / (var + eps).sqrt());
                }
            }
        }
    }
    Ok(out)
}
