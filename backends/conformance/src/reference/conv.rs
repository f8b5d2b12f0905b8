//! Convolutions in f64, each written from its definition as a sum over
//! kernel taps: IM2COL, CONV_2D, CONV_2D_DW, CONV_TRANSPOSE_1D and
//! CONV_TRANSPOSE_2D.

use gantry_engine::ConvParams;

use super::Array;

/// The input index `o·stride + k·dilation - pad` along `dim`, if inside `0..len`.
fn tap(conv: &ConvParams, dim: usize, o: usize, k: usize, len: usize) -> Option<usize> {
    let at = (o * conv.stride[dim] as usize + k * conv.dilation[dim] as usize) as i64 - conv.pad[dim] as i64;
    (at >= 0 && (at as usize) < len).then_some(at as usize)
}

/// IM2COL: result element `[(c·KH + ky)·KW + kx, ow, oh, n]` is the image
/// at the tap of `(ow, kx)` and `(oh, ky)` in channel `c`, or 0 in the padding.
pub fn im2col(kernel: &Array, image: &Array, conv: &ConvParams, is_2d: bool, ne: [usize; 4]) -> Result<Array, String> {
    let (kw, kh) = (kernel.ne[0], if is_2d { kernel.ne[1] } else { 1 });
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        let (kx, ky, c) = (i[0] % kw, i[0] / kw % kh, i[0] / (kw * kh));
        let v = if is_2d {
            match (tap(conv, 0, i[1], kx, image.ne[0]), tap(conv, 1, i[2], ky, image.ne[1])) {
                (Some(x), Some(y)) => image.at([x, y, c, i[3]]),
                _ => 0.0,
            }
        } else {
            tap(conv, 0, i[1], kx, image.ne[0]).map_or(0.0, |x| image.at([x, c, i[2], 0]))
        };
        out.set(i, v);
    }
    Ok(out)
}

/// CONV_2D (`depthwise` false) and CONV_2D_DW: `out[x, y, o, n] = Σ
/// kernel[kx, ky, c, o] · image[tap(x, kx), tap(y, ky), c, n]` over the
/// input channels `c`, or over `c = o` alone with kernel channel 0.
pub fn conv_2d(
    kernel: &Array,
    image: &Array,
    conv: &ConvParams,
    depthwise: bool,
    ne: [usize; 4],
) -> Result<Array, String> {
    let [kw, kh, kc, _] = kernel.ne;
    let mut out = Array::filled(ne, 0.0);
    for i in Array::indices(ne) {
        let [x, y, o, n] = i;
        let mut acc = 0.0;
        let channels = if depthwise { o..o + 1 } else { 0..kc };
        for c in channels {
            for ky in 0..kh {
                for kx in 0..kw {
                    if let (Some(sx), Some(sy)) = (tap(conv, 0, x, kx, image.ne[0]), tap(conv, 1, y, ky, image.ne[1])) {
                        let w = kernel.at([kx, ky, if depthwise { 0 } else { c }, o]);
                        acc += w * image.at([sx, sy, c, n]);
                    }
                }
            }
        }
        out.set(i, acc);
    }
    Ok(out)
}

/// CONV_TRANSPOSE_1D: `out[x, o] = Σ kernel[k, o, c] · input[i, c]` over
/// `x = i·stride + k`.
pub fn conv_transpose_1d(kernel: &Array, input: &Array, stride: usize, ne: [usize; 4]) -> Result<Array, String> {
    let mut out = Array::filled(ne, 0.0);
    for o in 0..kernel.ne[1] {
        for c in 0..kernel.ne[2] {
            for i in 0..input.ne[0] {
                for k in 0..kernel.ne[0] {
                    let x = i * stride + k;
                    let v = out.at([x, o, 0, 0]) + kernel.at([k, o, c, 0]) * input.at([i, c, 0, 0]);
                    out.set([x, o, 0, 0], v);
                }
            }
        }
    }
    Ok(out)
}

/// CONV_TRANSPOSE_2D: `out[x, y, o, n] = Σ kernel[kx, ky, o, c] ·
/// input[ix, iy, c, n]` over `x = ix·stride + kx`, `y = iy·stride + ky`.
pub fn conv_transpose_2d(kernel: &Array, input: &Array, stride: usize, ne: [usize; 4]) -> Result<Array, String> {
    let [kw, kh, oc, ic] = kernel.ne;
    let mut out = Array::filled(ne, 0.0);
    for n in 0..input.ne[3] {
        for c in 0..ic {
            for iy in 0..input.ne[1] {
                for ix in 0..input.ne[0] {
                    let v = input.at([ix, iy, c, n]);
                    for o in 0..oc {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let at = [ix * stride + kx, iy * stride + ky, o, n];
                                out.set(at, out.at(at) + kernel.at([kx, ky, o, c]) * v);
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}
