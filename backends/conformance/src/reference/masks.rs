//! FILL, TRI, DIAG, DIAG_MASK_ZERO, SET, ACC, ADD1, COUNT_EQUAL and XIELU
//! in f64.

use gantry_engine::TriType;

use super::Array;

/// FILL: `c` everywhere.
pub fn fill(ne: [usize; 4], c: f64) -> Result<Array, String> {
    Ok(Array::filled(ne, c))
}

/// TRI: element `[i0, i1]` where `kind` keeps it, else 0.
pub fn tri(a: &Array, kind: TriType) -> Result<Array, String> {
    let mut out = a.clone();
    for i in Array::indices(a.ne) {
        if !kind.keeps(i[0], i[1]) {
            out.set(i, 0.0);
        }
    }
    Ok(out)
}

/// DIAG: `out[i, j] = a[i]` where `i == j`, else 0.
pub fn diag(a: &Array) -> Result<Array, String> {
    let ne = [a.ne[0], a.ne[0], a.ne[2], a.ne[3]];
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        if i[0] == i[1] {
            out.set(i, a.at([i[0], 0, i[2], i[3]]));
        }
    }
    Ok(out)
}

/// DIAG_MASK_ZERO: 0 where the column is past `n_past` plus the row.
pub fn diag_mask_zero(a: &Array, n_past: usize) -> Result<Array, String> {
    let mut out = a.clone();
    for i in Array::indices(a.ne) {
        if i[0] > n_past + i[1] {
            out.set(i, 0.0);
        }
    }
    Ok(out)
}

/// SET (`add` false) and ACC: `b`'s element `i` goes to (or is added to)
/// element `(offset + Σ i_k · nb_k) / elem` of the contiguous `a`.
pub fn set_acc(a: &Array, b: &Array, nb: [usize; 3], offset: usize, elem: usize, add: bool) -> Result<Array, String> {
    let mut out = a.clone();
    for i in Array::indices(b.ne) {
        let byte = offset + i[0] * elem + i[1] * nb[0] + i[2] * nb[1] + i[3] * nb[2];
        let k = byte / elem;
        let old = *out.data.get(k).ok_or_else(|| format!("byte {byte} is outside {:?}", a.ne))?;
        out.data[k] = if add { old + b.at(i) } else { b.at(i) };
    }
    Ok(out)
}

/// ADD1: `a + b[0]`.
pub fn add1(a: &Array, b: &Array) -> Result<Array, String> {
    let v = *b.data.first().ok_or("an empty addend")?;
    Ok(Array { ne: a.ne, data: a.data.iter().map(|x| x + v).collect() })
}

/// COUNT_EQUAL: the number of equal positions.
pub fn count_equal(a: &Array, b: &Array) -> Result<Array, String> {
    let n = a.data.iter().zip(&b.data).filter(|(x, y)| x == y).count();
    Ok(Array { ne: [1, 1, 1, 1], data: vec![n as f64] })
}

/// XIELU with ggml's stored parameters.
pub fn xielu(a: &Array, alpha_n: f64, alpha_p: f64, beta: f64, eps: f64) -> Result<Array, String> {
    let f = |x: f64| if x > 0.0 { alpha_p * x * x + beta * x } else { (x.min(eps).exp_m1() - x) * alpha_n + beta * x };
    Ok(Array { ne: a.ne, data: a.data.iter().map(|&x| f(x)).collect() })
}
