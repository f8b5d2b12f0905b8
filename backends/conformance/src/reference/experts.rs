//! The mixture-of-experts ops in f64: MUL_MAT_ID and ADD_ID, read straight
//! from their definitions (slot by slot, no grouping).

use super::Array;

/// An id as an expert index below `n`, or why it is not one.
fn expert(id: f64, n: usize, what: &str) -> Result<usize, String> {
    if id >= 0.0 && (id as usize) < n && id.fract() == 0.0 {
        Ok(id as usize)
    } else {
        Err(format!("{what} id {id} outside 0..{n}"))
    }
}

/// `out[i, e, t] = sum_p w[p, i, ids[e, t]] * b[p, e % n_b, t]`.
pub fn mul_mat_id(w: &Array, b: &Array, ids: &Array) -> Result<Array, String> {
    let [k, m, n_expert, _] = w.ne;
    let [n_used, n_tokens, _, _] = ids.ne;
    if b.ne[0] != k || b.ne[1] == 0 || n_used % b.ne[1] != 0 || b.ne[2] != n_tokens {
        return Err(format!("experts {:?} x {:?} with ids {:?}", w.ne, b.ne, ids.ne));
    }
    let mut out = Array::filled([m, n_used, n_tokens, 1], 0.0);
    for t in 0..n_tokens {
        for e in 0..n_used {
            let x = expert(ids.at([e, t, 0, 0]), n_expert, "expert")?;
            for i in 0..m {
                let sum: f64 = (0..k).map(|p| w.at([p, i, x, 0]) * b.at([p, e % b.ne[1], t, 0])).sum();
                out.set([i, e, t, 0], sum);
            }
        }
    }
    Ok(out)
}

/// `out[i, e, t] = a[i, e, t] + bias[i, ids[e, t]]`.
pub fn add_id(a: &Array, bias: &Array, ids: &Array) -> Result<Array, String> {
    let mut out = a.clone();
    for [i, e, t, i3] in Array::indices(a.ne) {
        let x = expert(ids.at([e, t, 0, 0]), bias.ne[1], "bias row")?;
        out.set([i, e, t, i3], a.at([i, e, t, i3]) + bias.at([i, x, 0, 0]));
    }
    Ok(out)
}
