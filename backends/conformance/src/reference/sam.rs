//! SAM's vision ops in f64, from their definitions: windows cut from and
//! put back into an image, the relative-position table and the decomposed
//! relative positions added to attention scores.

use super::Array;

/// WIN_PART: window `py · npx + px` of side `w`, zeros past the image.
pub fn win_part(a: &Array, npx: usize, w: usize, ne: [usize; 4]) -> Array {
    let mut out = Array::filled(ne, 0.0);
    for [c, i1, i2, win] in Array::indices(ne) {
        let (x, y) = ((win % npx) * w + i1, (win / npx) * w + i2);
        if x < a.ne[1] && y < a.ne[2] {
            out.set([c, i1, i2, win], a.at([c, x, y, 0]));
        }
    }
    out
}

/// WIN_UNPART: pixel `(x, y)` from window `(y / w) · ⌈W / w⌉ + x / w`.
pub fn win_unpart(a: &Array, w: usize, ne: [usize; 4]) -> Array {
    let npx = ne[1].div_ceil(w);
    let mut out = Array::filled(ne, 0.0);
    for [c, x, y, _] in Array::indices(ne) {
        out.set([c, x, y, 0], a.at([c, x % w, y % w, (y / w) * npx + x / w]));
    }
    out
}

/// GET_REL_POS: `out[c, k, q] = a[c, n - 1 - k + q]`.
pub fn get_rel_pos(a: &Array, ne: [usize; 4]) -> Array {
    let mut out = Array::filled(ne, 0.0);
    for [c, k, q, _] in Array::indices(ne) {
        out.set([c, k, q, 0], a.at([c, ne[1] - 1 - k + q, 0, 0]));
    }
    out
}

/// ADD_REL_POS: `out[y · n + x, q, b] = a + ph[y, q, b] + pw[x, q, b]`,
/// query `q` split as `q1 + n_q1 · q2` over the terms' dims 1 and 2.
pub fn add_rel_pos(a: &Array, pw: &Array, ph: &Array) -> Array {
    let n = pw.ne[0];
    let mut out = a.clone();
    for [col, q, b, _] in Array::indices(a.ne) {
        let (y, x) = (col / n, col % n);
        let (q1, q2) = (q % pw.ne[1], q / pw.ne[1]);
        let v = a.at([col, q, b, 0]) + ph.at([y, q1, q2, b]) + pw.at([x, q1, q2, b]);
        out.set([col, q, b, 0], v);
    }
    out
}
