//! FLASH_ATTN_EXT in f64, as plain two-pass attention per query and head.

use super::{Array, alibi_slope};

/// `out[:, h, q, b] = sum_c softmax_c(s_c) v[:, c, h / rv2, b / rv3]` with
/// `s_c = cap(dot(q[:, q, h, b], k[:, c, h / rk2, b / rk3]) * scale) + slope(h) * mask[c, q, h % m2, b % m3]`
/// and `cap(s) = softcap * tanh(s / softcap)` when softcap is not 0. Keys
/// masked with `-inf` are left out; a query with none left gets zeros. A
/// head's sink `sinks[h]` joins the softmax's sum with no value.
#[expect(clippy::too_many_arguments, reason = "FLASH_ATTN_EXT's five sources and three scalars")]
pub fn flash_attn_ext(
    q: &Array,
    k: &Array,
    v: &Array,
    mask: Option<&Array>,
    sinks: Option<&Array>,
    scale: f64,
    max_bias: f64,
    softcap: f64,
) -> Result<Array, String> {
    let [dk, n_q, n_head, n_batch] = q.ne;
    let (dv, n_kv) = (v.ne[0], k.ne[1]);
    let (rk2, rk3, rv2, rv3) = (n_head / k.ne[2], n_batch / k.ne[3], n_head / v.ne[2], n_batch / v.ne[3]);
    let mut out = Array::filled([dv, n_head, n_q, n_batch], 0.0);
    for b in 0..n_batch {
        for h in 0..n_head {
            let slope = alibi_slope(max_bias, h, n_head);
            for iq in 0..n_q {
                let mut scores = Vec::with_capacity(n_kv);
                for c in 0..n_kv {
                    let m = mask.map_or(0.0, |m| slope * m.at([c, iq, h % m.ne[2], b % m.ne[3]]));
                    if m == f64::NEG_INFINITY {
                        continue;
                    }
                    let dot: f64 = (0..dk).map(|i| q.at([i, iq, h, b]) * k.at([i, c, h / rk2, b / rk3])).sum();
                    let mut s = dot * scale;
                    if softcap != 0.0 {
                        s = softcap * (s / softcap).tanh();
                    }
                    scores.push((c, s + m));
                }
                let sink = sinks.map(|s| s.at([h, 0, 0, 0]));
                let max = scores.iter().map(|&(_, s)| s).chain(sink).fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = scores.iter().map(|&(_, s)| s).chain(sink).map(|s| (s - max).exp()).sum();
                if scores.is_empty() || total == 0.0 {
                    continue;
                }
                for i in 0..dv {
                    let acc: f64 = scores.iter().map(|&(c, s)| (s - max).exp() * v.at([i, c, h / rv2, b / rv3])).sum();
                    out.set([i, h, iq, b], acc / total);
                }
            }
        }
    }
    Ok(out)
}
