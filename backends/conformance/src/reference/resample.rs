//! Resampling in f64: POOL_1D, POOL_2D, UPSCALE; and the padding family:
//! PAD, PAD_REFLECT_1D, ROLL.

use gantry_engine::{PoolOp, ScaleMode};

use super::Array;

/// The inputs of window `o` (`o·s - p .. + k`) inside `0..len`.
fn window(o: usize, k: u32, s: u32, p: u32, len: usize) -> impl Iterator<Item = usize> {
    let start = o as i64 * i64::from(s) - i64::from(p);
    (start..start + i64::from(k)).filter(move |&i| i >= 0 && (i as usize) < len).map(|i| i as usize)
}

/// POOL_1D (`k[1] = 1`, `two_d` false) and POOL_2D: the max (`-f32::MAX`
/// over padding only) or mean of each window; POOL_1D's mean is over the
/// elements inside the input, POOL_2D's over the whole window.
pub fn pool(
    a: &Array,
    op: PoolOp,
    k: [u32; 2],
    s: [u32; 2],
    p: [u32; 2],
    two_d: bool,
    ne: [usize; 4],
) -> Result<Array, String> {
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        let mut values = Vec::new();
        let ys: Vec<usize> = if two_d { window(i[1], k[1], s[1], p[1], a.ne[1]).collect() } else { vec![i[1]] };
        for &y in &ys {
            for x in window(i[0], k[0], s[0], p[0], a.ne[0]) {
                values.push(a.at([x, y, i[2], i[3]]));
            }
        }
        let v = match op {
            PoolOp::Max => values.iter().copied().fold(-(f32::MAX as f64), f64::max),
            PoolOp::Avg if two_d => values.iter().sum::<f64>() / f64::from(k[0] * k[1]),
            PoolOp::Avg if values.is_empty() => 0.0,
            PoolOp::Avg => values.iter().sum::<f64>() / values.len() as f64,
        };
        out.set(i, v);
    }
    Ok(out)
}

/// UPSCALE to `ne`. The source indices come from ggml's f32 arithmetic
/// (the op's definition picks them); the interpolation is f64.
pub fn upscale(a: &Array, mode: ScaleMode, align_corners: bool, ne: [usize; 4]) -> Result<Array, String> {
    let mut sf: [f32; 4] = std::array::from_fn(|i| ne[i] as f32 / a.ne[i] as f32);
    let offset = if align_corners { 0.0 } else { 0.5 };
    if align_corners {
        for i in 0..2 {
            if ne[i] > 1 && a.ne[i] > 1 {
                sf[i] = (ne[i] - 1) as f32 / (a.ne[i] - 1) as f32;
            }
        }
    }
    let nearest = |i: usize, d: usize| ((i as f32 / sf[d]) as usize).min(a.ne[d] - 1);
    // Source positions below and above, and the weight of the one above.
    let linear = |i: usize, d: usize| {
        let x = (i as f32 + offset) / sf[d] - offset;
        let lo = (x.floor() as i64).clamp(0, a.ne[d] as i64 - 1) as usize;
        let hi = (x.floor() as i64 + 1).clamp(0, a.ne[d] as i64 - 1) as usize;
        (lo, hi, f64::from((x - lo as f32).clamp(0.0, 1.0)))
    };
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        let (j2, j3) = (nearest(i[2], 2), nearest(i[3], 3));
        let v = match mode {
            ScaleMode::Nearest => a.at([nearest(i[0], 0), nearest(i[1], 1), j2, j3]),
            ScaleMode::Bilinear => {
                let (x0, x1, dx) = linear(i[0], 0);
                let (y0, y1, dy) = linear(i[1], 1);
                let top = a.at([x0, y0, j2, j3]) * (1.0 - dx) + a.at([x1, y0, j2, j3]) * dx;
                let bottom = a.at([x0, y1, j2, j3]) * (1.0 - dx) + a.at([x1, y1, j2, j3]) * dx;
                top * (1.0 - dy) + bottom * dy
            }
        };
        out.set(i, v);
    }
    Ok(out)
}

/// PAD: the source shifted by `lp`, zeros around it, or (`circular`) the
/// source repeated in every direction.
pub fn pad(a: &Array, lp: [u32; 4], circular: bool, ne: [usize; 4]) -> Result<Array, String> {
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        let j: [i64; 4] = std::array::from_fn(|d| i[d] as i64 - i64::from(lp[d]));
        let v = if circular {
            a.at(std::array::from_fn(|d| j[d].rem_euclid(a.ne[d] as i64) as usize))
        } else if (0..4).all(|d| j[d] >= 0 && (j[d] as usize) < a.ne[d]) {
            a.at(j.map(|v| v as usize))
        } else {
            0.0
        };
        out.set(i, v);
    }
    Ok(out)
}

/// PAD_REFLECT_1D: position `i - p0` of each row, reflected back into the
/// row at its ends (`-1` reads element 1, `n` reads `n - 2`).
pub fn pad_reflect_1d(a: &Array, p0: u32, ne: [usize; 4]) -> Result<Array, String> {
    let n = a.ne[0] as i64;
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        let j = (i[0] as i64 - i64::from(p0)).abs();
        let j = if j >= n { 2 * (n - 1) - j } else { j };
        out.set(i, a.at([j as usize, i[1], i[2], i[3]]));
    }
    Ok(out)
}

/// ROLL: `out[i] = a[(i - shift) mod ne]` along every dim.
pub fn roll(a: &Array, shift: [i32; 4]) -> Result<Array, String> {
    let mut out = Array::filled(a.ne, 0.0);
    for i in Array::indices(a.ne) {
        out.set(
            i,
            a.at(std::array::from_fn(|d| (i[d] as i64 - i64::from(shift[d])).rem_euclid(a.ne[d] as i64) as usize)),
        );
    }
    Ok(out)
}
