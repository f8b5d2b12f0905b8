//! The transposed convolutions CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D:
//! each input element spreads the kernel over the result from its
//! position times the stride. A task computes whole result rows, so no
//! two tasks add into one element.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    src_desc(ctx, d, 0).is_some_and(|k| matches!(k.dtype, DType::F32 | DType::F16))
        && src_desc(ctx, d, 1).is_some_and(|x| x.dtype == DType::F32)
        && d.dtype == DType::F32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let kernel = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let input = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    let (two_d, s) = match d.op {
        Op::ConvTranspose2d { stride } => (true, stride as usize),
        Op::ConvTranspose1d { stride } => (false, stride as usize),
        _ => return Err(shape_err(ctx, t, d, "not a transposed convolution")),
    };
    let [kw, kh, k2, k3] = kernel.ne;
    let [iw, ih, ic, n] = input.ne;
    // 1-D: kernel [K, OC, IC], input [L, IC]; 2-D: kernel [KW, KH, OC, IC], input [W, H, IC, N].
    let (oc, kic) = if two_d { (k2, k3) } else { (kh, k2) };
    let out = |x: usize, k: usize| if x == 0 { 0 } else { (x - 1) * s + k };
    let expect = if two_d { [out(iw, kw), out(ih, kh), oc, n] } else { [out(iw, kw), oc, 1, 1] };
    if dst.ne != expect || kic != if two_d { ic } else { ih } || s == 0 {
        return Err(shape_err(ctx, t, d, format!("kernel {:?} and input {:?}", kernel.ne, input.ne)));
    }
    let ow = dst.ne[0];
    let work = iw * kw * kic * if two_d { kh } else { 1 };
    par.for_each(dst.nrows(), work, ow + iw, |rows, tmp| {
        let (acc, line) = tmp.split_at_mut(ow);
        for r in rows {
            let [i1, i2, i3] = dst.row_index(r);
            acc.fill(0.0);
            if two_d {
                let (y, o, b) = (i1, i2, i3);
                // The kernel rows ky with y = iy·s + ky for an input row iy.
                for ky in (0..kh.min(y + 1)).filter(|ky| (y - ky) % s == 0 && (y - ky) / s < ih) {
                    let iy = (y - ky) / s;
                    for c in 0..ic {
                        // SAFETY: iy < H, c < IC, b < N.
                        unsafe { input.load_row(iy, c, b, line) };
                        for kx in 0..kw {
                            // SAFETY: kx < KW, ky < KH, o < OC, c < IC.
                            let w = unsafe { kernel.get(kx, ky, o, c) };
                            for (ix, &v) in line[..iw].iter().enumerate() {
                                acc[ix * s + kx] += w * v;
                            }
                        }
                    }
                }
            } else {
                let o = i1;
                for c in 0..ih {
                    // SAFETY: c < IC (the input's rows).
                    unsafe { input.load_row(c, 0, 0, line) };
                    for k in 0..kw {
                        // SAFETY: k < K, o < OC, c < IC.
                        let w = unsafe { kernel.get(k, o, c, 0) };
                        for (ix, &v) in line[..iw].iter().enumerate() {
                            acc[ix * s + k] += w * v;
                        }
                    }
                }
            }
            // SAFETY: row r is in range and written by this task alone.
            unsafe { dst.store_row(i1, i2, i3, acc) };
        }
    });
    Ok(())
}
