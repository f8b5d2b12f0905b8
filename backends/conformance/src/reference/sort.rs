//! Sorting and running sums in f64: ARGSORT, TOP_K, CUMSUM.

use std::cmp::Ordering;

use gantry_engine::SortOrder;

use super::Array;

/// The indices that sort each row, ties in index order; TOP_K's are the
/// first `k` of a descending sort.
fn sorted_rows(a: &Array, order: SortOrder, k: usize) -> Array {
    let n0 = a.ne[0];
    let mut out = Array::filled([k, a.ne[1], a.ne[2], a.ne[3]], 0.0);
    for (r, row) in a.data.chunks(n0.max(1)).enumerate() {
        let mut idx: Vec<usize> = (0..n0).collect();
        idx.sort_by(|&x, &y| {
            let by_value: Ordering = match order {
                SortOrder::Asc => row[x].total_cmp(&row[y]),
                SortOrder::Desc => row[y].total_cmp(&row[x]),
            };
            by_value.then(x.cmp(&y))
        });
        for (i, &v) in idx[..k].iter().enumerate() {
            out.data[r * k + i] = v as f64;
        }
    }
    out
}

/// ARGSORT: each row's sorting indices.
pub fn argsort(a: &Array, order: SortOrder) -> Result<Array, String> {
    Ok(sorted_rows(a, order, a.ne[0]))
}

/// TOP_K: the indices of each row's `k` largest, largest first.
pub fn top_k(a: &Array, k: usize) -> Result<Array, String> {
    if k > a.ne[0] {
        return Err(format!("k = {k} > row length {}", a.ne[0]));
    }
    Ok(sorted_rows(a, SortOrder::Desc, k))
}

/// CUMSUM: each row's inclusive running sums.
pub fn cumsum(a: &Array) -> Result<Array, String> {
    let mut out = a.clone();
    for row in out.data.chunks_mut(a.ne[0].max(1)) {
        let mut acc = 0.0;
        for v in row.iter_mut() {
            acc += *v;
            *v = acc;
        }
    }
    Ok(out)
}
