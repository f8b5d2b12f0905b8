//! The recurrent linear-attention ops in f64, written from their
//! recurrences: RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7 (the `T` tokens
//! split evenly over the sequences, the result the outputs then the new
//! states) and GATED_DELTA_NET (outputs, then `K` snapshots of the states).

use super::Array;

/// Which recurrence, with GATED_LINEAR_ATTN's scale.
#[derive(Clone, Copy)]
pub enum Rule {
    /// RWKV-6: srcs k, v, r, tf, td, state.
    Wkv6,
    /// Gated linear attention: srcs k, v, q, g, state.
    Gla(f64),
    /// RWKV-7: srcs r, w, k, v, a, b, state.
    Wkv7,
}

/// RWKV_WKV6, GATED_LINEAR_ATTN or RWKV_WKV7 over `srcs` (the state
/// last), with `st[i][j]` the state of one head at flat position
/// `i · S + j`.
pub fn linear_attn(rule: Rule, srcs: &[Array]) -> Result<Array, String> {
    let state = srcs.last().ok_or("no sources")?;
    let sizes = &srcs[if matches!(rule, Rule::Wkv7) { 2 } else { 0 }];
    let [s, h, n_t, _] = sizes.ne;
    let n_seqs = state.ne[1];
    let c = s * h;
    let per_seq = n_t / n_seqs;
    let mut out = vec![0.0; c * (n_t + s * n_seqs)];
    for seq in 0..n_seqs {
        for head in 0..h {
            let block = (seq * h + head) * s * s;
            let mut st: Vec<Vec<f64>> = (0..s).map(|i| state.data[block + i * s..][..s].to_vec()).collect();
            for tok in seq * per_seq..(seq + 1) * per_seq {
                let x = |src: usize, i: usize| srcs[src].data[tok * c + head * s + i];
                for (i, row) in st.iter_mut().enumerate() {
                    match rule {
                        Rule::Wkv6 => {
                            let (k, r, tf, td) = (x(0, i), x(2, i), srcs[3].data[head * s + i], x(4, i));
                            for (j, st_ij) in row.iter_mut().enumerate() {
                                let kv = k * x(1, j);
                                out[tok * c + head * s + j] += r * (tf * kv + *st_ij);
                                *st_ij = *st_ij * td + kv;
                            }
                        }
                        Rule::Gla(scale) => {
                            let (k, q, g) = (x(0, i), x(2, i) * scale, x(3, i));
                            for (j, st_ij) in row.iter_mut().enumerate() {
                                *st_ij = *st_ij * g + k * x(1, j);
                                out[tok * c + head * s + j] += *st_ij * q;
                            }
                        }
                        Rule::Wkv7 => {
                            // Row i runs along v; column j along k.
                            let sa: f64 = (0..s).map(|j| x(4, j) * row[j]).sum();
                            let v = x(3, i);
                            for (j, st_ij) in row.iter_mut().enumerate() {
                                *st_ij = *st_ij * x(1, j) + v * x(2, j) + sa * x(5, j);
                                out[tok * c + head * s + i] += *st_ij * x(0, j);
                            }
                        }
                    }
                }
            }
            for (i, row) in st.iter().enumerate() {
                out[n_t * c + block + i * s..][..s].copy_from_slice(row);
            }
        }
    }
    Ok(Array { ne: [c, n_t + s * n_seqs, 1, 1], data: out })
}

/// GATED_DELTA_NET over srcs `[q, k, v, g, beta, state]` keeping `k_states`
/// states, with `st[i][j]` the state's entry `[i, j]` (`i` along k, `j`
/// along v, stored at `j · S + i`); snapshots from before the first token
/// are zeros.
pub fn gated_delta_net(srcs: &[Array], k_states: usize) -> Result<Array, String> {
    let [q, k, v, g, beta, state] = srcs else { return Err("GATED_DELTA_NET takes six sources".into()) };
    let [s, h, n_t, n_seqs] = v.ne;
    let y_len = s * h * n_t * n_seqs;
    let state_len = s * s * h * n_seqs;
    let mut out = vec![0.0; y_len + k_states * state_len];
    let scale = 1.0 / (s as f64).sqrt();
    for seq in 0..n_seqs {
        for head in 0..h {
            let mut st: Vec<Vec<f64>> = (0..s).map(|i| (0..s).map(|j| state.at([i, j, head, seq])).collect()).collect();
            let (qh, qs) = (head % q.ne[1], seq / (n_seqs / q.ne[3]));
            let (kh, ks) = (head % k.ne[1], seq / (n_seqs / k.ne[3]));
            let block = (seq * h + head) * s * s;
            let store = |out: &mut Vec<f64>, slot: usize, st: &[Vec<f64>]| {
                for (i, row) in st.iter().enumerate() {
                    for (j, &x) in row.iter().enumerate() {
                        out[y_len + slot * state_len + block + j * s + i] = x;
                    }
                }
            };
            for tok in 0..n_t {
                let kv: Vec<f64> = (0..s).map(|i| k.at([i, kh, tok, ks])).collect();
                for (i, row) in st.iter_mut().enumerate() {
                    let decay = g.at([if g.ne[0] == 1 { 0 } else { i }, head, tok, seq]).exp();
                    row.iter_mut().for_each(|x| *x *= decay);
                }
                let b = beta.at([0, head, tok, seq]);
                let delta: Vec<f64> = (0..s)
                    .map(|j| (v.at([j, head, tok, seq]) - (0..s).map(|i| st[i][j] * kv[i]).sum::<f64>()) * b)
                    .collect();
                for (i, row) in st.iter_mut().enumerate() {
                    for (j, x) in row.iter_mut().enumerate() {
                        *x += kv[i] * delta[j];
                    }
                }
                for j in 0..s {
                    let y: f64 = (0..s).map(|i| st[i][j] * q.at([i, qh, tok, qs])).sum();
                    out[((seq * n_t + tok) * h + head) * s + j] = y * scale;
                }
                let slot = n_t - 1 - tok;
                if slot < k_states {
                    store(&mut out, slot, &st);
                }
            }
            if n_t == 0 {
                store(&mut out, 0, &st);
            }
        }
    }
    Ok(Array { ne: [s * h, n_t * n_seqs + k_states * s * n_seqs, 1, 1], data: out })
}
