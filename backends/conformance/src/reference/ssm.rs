//! SSM_CONV and SSM_SCAN in f64, written from their definitions: a
//! sliding dot product per channel, and the selective-scan recurrence per
//! state element.

use super::Array;

/// SSM_CONV: `out[i, t, s] = Σ_k sx[t + k, i, s] · c[k, i]`.
pub fn ssm_conv(sx: &Array, c: &Array, ne: [usize; 4]) -> Result<Array, String> {
    let mut out = Array::filled(ne, 0.0);
    for [i, t, s, _] in Array::indices(ne) {
        let v = (0..c.ne[0]).map(|k| sx.at([t + k, i, s, 0]) * c.at([k, i, 0, 0])).sum();
        out.set([i, t, s, 0], v);
    }
    Ok(out)
}

/// `ln(1 + e^x)`, `x` itself above 20 as ggml.
fn softplus(x: f64) -> f64 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

/// SSM_SCAN over srcs `[s, x, dt, A, B, C, ids]`, keeping `k_states` states:
/// `y` as `[head_dim, n_head, n_tokens, n_seqs]` flattened, then the
/// state snapshots (the final one, then those 1, 2, ... tokens before
/// the end; zeros for snapshots from before the first token).
pub fn ssm_scan(srcs: &[Array], k_states: usize, len: usize) -> Result<Array, String> {
    let [s0, x, dt, a, b, c, ids] = srcs else { return Err("SSM_SCAN takes seven sources".into()) };
    let [nc, nr, nh] = [s0.ne[0], s0.ne[1], s0.ne[2]];
    let [nt, ns, ng] = [x.ne[2], x.ne[3], b.ne[1]];
    let state_len = nc * nr * nh;
    let y_len = nr * nh * nt * ns;
    let mut out = vec![0.0; len];
    for i3 in 0..ns {
        let id = ids.at([i3, 0, 0, 0]);
        if id < 0.0 || id as usize >= s0.ne[3] {
            return Err(format!("ids[{i3}] = {id} is outside the {} states", s0.ne[3]));
        }
        for h in 0..nh {
            let g = h / (nh / ng);
            for i1 in 0..nr {
                let mut st: Vec<f64> = (0..nc).map(|i0| s0.at([i0, i1, h, id as usize])).collect();
                let state_at = |slot: usize, i0: usize| y_len + (slot * ns + i3) * state_len + i0 + nc * (i1 + nr * h);
                for i2 in 0..nt {
                    let dt_sp = softplus(dt.at([h, i2, i3, 0]));
                    let x_dt = x.at([i1, h, i2, i3]) * dt_sp;
                    let mut y = 0.0;
                    for (i0, v) in st.iter_mut().enumerate() {
                        let decay = if a.ne[0] == 1 { a.at([0, h, 0, 0]) } else { a.at([i0, h, 0, 0]) };
                        *v = *v * (dt_sp * decay).exp() + b.at([i0, g, i2, i3]) * x_dt;
                        y += *v * c.at([i0, g, i2, i3]);
                    }
                    out[i1 + nr * (h + nh * (i2 + nt * i3))] = y;
                    let slot = nt - 1 - i2;
                    if slot > 0 && slot < k_states {
                        for (i0, &v) in st.iter().enumerate() {
                            out[state_at(slot, i0)] = v;
                        }
                    }
                }
                for (i0, &v) in st.iter().enumerate() {
                    out[state_at(0, i0)] = v;
                }
            }
        }
    }
    Ok(Array { ne: [len, 1, 1, 1], data: out })
}
