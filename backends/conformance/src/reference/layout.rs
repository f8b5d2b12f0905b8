//! Ops that move elements: CPY / CONT / DUP, GET_ROWS, SET_ROWS, CONCAT, REPEAT.

use super::Array;

/// The elements of `a` in logical order, laid out with the shape `ne`.
pub fn copy(a: &Array, ne: [usize; 4]) -> Result<Array, String> {
    if a.data.len() != ne.iter().product::<usize>() {
        return Err(format!("{:?} has a different element count than {ne:?}", a.ne));
    }
    Ok(Array { ne, data: a.data.clone() })
}

fn row_index(idx: &Array, i: [usize; 3], limit: usize) -> Result<usize, String> {
    let v = idx.at([i[0], i[1], i[2], 0]);
    if v < 0.0 || v >= limit as f64 {
        return Err(format!("row index {v} outside 0..{limit}"));
    }
    Ok(v as usize)
}

/// `out[:, i, j, k] = a[:, idx[i, j, k], j, k]`.
pub fn get_rows(a: &Array, idx: &Array, ne: [usize; 4]) -> Result<Array, String> {
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        let r = row_index(idx, [i[1], i[2], i[3]], a.ne[1])?;
        out.set(i, a.at([i[0], r, i[2], i[3]]));
    }
    Ok(out)
}

/// `dst` with row `idx[i, j % idx.ne1, k % idx.ne2]` of each `[.., j, k]`
/// replaced by row `i` of `rows`, in order (a later duplicate wins), and
/// which rows of `dst` (counted in logical order) were written.
pub fn set_rows(mut dst: Array, rows: &Array, idx: &Array) -> Result<(Array, Vec<bool>), String> {
    let mut written = vec![false; dst.ne[1] * dst.ne[2] * dst.ne[3]];
    for k in 0..rows.ne[3] {
        for j in 0..rows.ne[2] {
            for i in 0..rows.ne[1] {
                let r = row_index(idx, [i, j % idx.ne[1], k % idx.ne[2]], dst.ne[1])?;
                for c in 0..rows.ne[0] {
                    dst.set([c, r, j, k], rows.at([c, i, j, k]));
                }
                written[r + dst.ne[1] * (j + dst.ne[2] * k)] = true;
            }
        }
    }
    Ok((dst, written))
}

/// `a` then `b` along `dim`.
pub fn concat(a: &Array, b: &Array, dim: usize) -> Result<Array, String> {
    let mut ne = a.ne;
    ne[dim] += b.ne[dim];
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        let v = if i[dim] < a.ne[dim] {
            a.at(i)
        } else {
            let mut j = i;
            j[dim] -= a.ne[dim];
            b.at(j)
        };
        out.set(i, v);
    }
    Ok(out)
}

/// `a` tiled to `ne`.
pub fn repeat(a: &Array, ne: [usize; 4]) -> Result<Array, String> {
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        out.set(i, a.at([i[0] % a.ne[0], i[1] % a.ne[1], i[2] % a.ne[2], i[3] % a.ne[3]]));
    }
    Ok(out)
}
