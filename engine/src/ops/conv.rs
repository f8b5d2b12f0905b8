//! Convolutions: IM2COL (patches as rows), the direct CONV_2D and
//! CONV_2D_DW, the transposed CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D, and
//! [`Context::conv_2d`], ggml's `ggml_conv_2d`: IM2COL and a MUL_MAT.

use gantry_arenas::TensorId;

use crate::{Context, ConvParams, DType, Op, Result, op_err};

/// A transposed convolution's output length, `(input - 1)·stride +
/// kernel` (0 for an empty input), or `None` on overflow.
fn transposed_len(input: usize, kernel: usize, stride: u32) -> Option<usize> {
    if input == 0 {
        return Some(0);
    }
    (input - 1).checked_mul(stride as usize)?.checked_add(kernel)
}

impl Context {
    /// Checks a convolution's strides and dilations (at least 1).
    fn check_conv(&self, op: &'static str, conv: &ConvParams, dims: usize) -> Result<()> {
        for i in 0..dims {
            if conv.stride[i] == 0 || conv.dilation[i] == 0 {
                return Err(op_err!(
                    op,
                    "stride {:?} and dilation {:?} must be at least 1",
                    conv.stride,
                    conv.dilation
                ));
            }
        }
        Ok(())
    }

    /// The output length along `dim` of `image` under `kernel`, or an error
    /// naming both when the kernel does not fit the padded image.
    fn conv_out(
        &self,
        op: &'static str,
        conv: &ConvParams,
        dim: usize,
        kernel: TensorId,
        image: TensorId,
    ) -> Result<usize> {
        let (k, x) = (self.src(op, kernel)?.ne[dim], self.src(op, image)?.ne[dim]);
        conv.output_size(dim, x, k).ok_or_else(|| {
            op_err!(
                op,
                "kernel {} does not fit image {} along dim {dim} with padding {}, dilation {}",
                self.describe(kernel),
                self.describe(image),
                conv.pad[dim],
                conv.dilation[dim]
            )
        })
    }

    /// Image patches as rows (ggml's `ggml_im2col`), in `dtype` (F32 or F16).
    ///
    /// 2-D: `kernel` is `[KW, KH, IC, OC]` (only its shape counts), `image`
    /// `[W, H, IC, N]` (F32 or F16); the result is `[IC·KH·KW, OW, OH, N]`,
    /// each row one patch with channel slowest and zeros where the patch
    /// reaches into the padding. 1-D: `kernel` `[K, IC, OC]`, `image` `[L,
    /// IC, N]`, the result `[IC·K, OL, N]`; only index 0 of `conv` counts.
    ///
    /// ```
    /// use gantry_engine::{Context, ConvParams, DType};
    /// let mut ctx = Context::new();
    /// let k = ctx.tensor(DType::F16, [3, 3, 4, 8])?;
    /// let x = ctx.tensor(DType::F32, [10, 10, 4, 2])?;
    /// let cols = ctx.im2col(k, x, ConvParams::square(1, 1, 1), true, DType::F16)?;
    /// assert_eq!(ctx.desc(cols)?.ne, [36, 10, 10, 2]);
    /// # Ok::<(), gantry_engine::Error>(())
    /// ```
    pub fn im2col(
        &mut self,
        kernel: TensorId,
        image: TensorId,
        conv: ConvParams,
        is_2d: bool,
        dtype: DType,
    ) -> Result<TensorId> {
        const OP: &str = "IM2COL";
        let dk = self.src(OP, kernel)?;
        let di = self.expect_dtype(OP, image, &[DType::F32, DType::F16])?;
        if !matches!(dtype, DType::F32 | DType::F16) {
            return Err(op_err!(OP, "the result of {} must be f32 or f16, not {dtype}", self.describe(image)));
        }
        self.check_conv(OP, &conv, if is_2d { 2 } else { 1 })?;
        let ow = self.conv_out(OP, &conv, 0, kernel, image)?;
        let ne = if is_2d {
            if dk.ne[2] != di.ne[2] {
                return Err(op_err!(
                    OP,
                    "kernel {} and image {} differ in channels (dim 2)",
                    self.describe(kernel),
                    self.describe(image)
                ));
            }
            let oh = self.conv_out(OP, &conv, 1, kernel, image)?;
            [dk.ne[2] * dk.ne[1] * dk.ne[0], ow, oh, di.ne[3]]
        } else {
            if dk.ne[1] != di.ne[1] || di.ne[3] != 1 {
                return Err(op_err!(
                    OP,
                    "1-D: kernel {} and image {} must agree in channels (dim 1) and the image have 3 dims",
                    self.describe(kernel),
                    self.describe(image)
                ));
            }
            [dk.ne[1] * dk.ne[0], ow, di.ne[2], 1]
        };
        self.push_op(dtype, ne, Op::Im2col { conv, is_2d }, &[kernel, image])
    }

    /// A 2-D convolution the way ggml's `ggml_conv_2d` builds it: IM2COL
    /// of `image` (F32 patches), then one MUL_MAT against `kernel` `[KW,
    /// KH, IC, OC]` reshaped to `[KW·KH·IC, OC]` (any MUL_MAT weight dtype,
    /// contiguous), laid out again as `[OW, OH, OC, N]`. ggml multiplies the
    /// patches (F16) by the kernel; Gantry's MUL_MAT takes F32 activations,
    /// so the kernel comes first and the patches stay F32: the same
    /// products, in the order [`Context::conv_2d_direct`] computes.
    pub fn conv_2d(&mut self, kernel: TensorId, image: TensorId, conv: ConvParams) -> Result<TensorId> {
        let dk = self.src("CONV_2D", kernel)?;
        let cols = self.im2col(kernel, image, conv, true, DType::F32)?;
        let [k, ow, oh, n] = self.src("CONV_2D", cols)?.ne;
        let cols2 = self.reshape(cols, [k, ow * oh * n])?;
        let w2 = self.reshape(kernel, [k, dk.ne[3]])?;
        let prod = self.mul_mat(w2, cols2)?; // [OC, OW·OH·N]
        let prod4 = self.reshape(prod, [dk.ne[3], ow, oh, n])?;
        let perm = self.permute(prod4, [2, 0, 1, 3])?; // [OW, OH, OC, N]
        self.cont(perm)
    }

    /// A direct 2-D convolution (ggml's `ggml_conv_2d_direct`, op
    /// `CONV_2D`): `kernel` `[KW, KH, IC, OC]` (F32 or F16, contiguous),
    /// `image` F32 `[W, H, IC, N]`; the result is F32 `[OW, OH, OC, N]`.
    pub fn conv_2d_direct(&mut self, kernel: TensorId, image: TensorId, conv: ConvParams) -> Result<TensorId> {
        const OP: &str = "CONV_2D";
        let dk = self.expect_dtype(OP, kernel, &[DType::F32, DType::F16])?;
        self.expect_contiguous(OP, kernel, &dk)?;
        let di = self.expect_dtype(OP, image, &[DType::F32])?;
        self.check_conv(OP, &conv, 2)?;
        if dk.ne[2] != di.ne[2] {
            return Err(op_err!(
                OP,
                "kernel {} and image {} differ in input channels (dim 2)",
                self.describe(kernel),
                self.describe(image)
            ));
        }
        let ow = self.conv_out(OP, &conv, 0, kernel, image)?;
        let oh = self.conv_out(OP, &conv, 1, kernel, image)?;
        self.push_op(DType::F32, [ow, oh, dk.ne[3], di.ne[3]], Op::Conv2d(conv), &[kernel, image])
    }

    /// A depthwise 2-D convolution (ggml's `ggml_conv_2d_dw_direct`, op
    /// `CONV_2D_DW`): `kernel` `[KW, KH, 1, C]` (F32 or F16), `image` F32
    /// `[W, H, C, N]`, each channel convolved with its own kernel; the
    /// result is F32 `[OW, OH, C, N]`. An image whose channels are adjacent
    /// in memory (a permuted WHCN tensor stored CWHN) gives a result laid
    /// out the same way, as ggml does.
    pub fn conv_2d_dw_direct(&mut self, kernel: TensorId, image: TensorId, conv: ConvParams) -> Result<TensorId> {
        const OP: &str = "CONV_2D_DW";
        let dk = self.expect_dtype(OP, kernel, &[DType::F32, DType::F16])?;
        let di = self.expect_dtype(OP, image, &[DType::F32])?;
        self.check_conv(OP, &conv, 2)?;
        if dk.ne[2] != 1 || dk.ne[3] != di.ne[2] {
            return Err(op_err!(
                OP,
                "kernel {} must be [KW, KH, 1, C] with C the channels (dim 2) of {}",
                self.describe(kernel),
                self.describe(image)
            ));
        }
        let ow = self.conv_out(OP, &conv, 0, kernel, image)?;
        let oh = self.conv_out(OP, &conv, 1, kernel, image)?;
        let ne = [ow, oh, di.ne[2], di.ne[3]];
        let t = self.push_op(DType::F32, ne, Op::Conv2dDw(conv), &[kernel, image])?;
        // ggml_is_contiguous_channels: channels innermost in memory.
        let es = DType::F32.bytes_per_block();
        if di.nb[0] > di.nb[2] && di.nb[1] > di.nb[0] && di.nb[2] == es {
            // Nobody has seen the new node yet, so this is part of making it.
            let d = self.desc_mut_untracked(t)?;
            d.nb[0] = ne[2] * es;
            d.nb[1] = ne[0] * d.nb[0];
            d.nb[2] = es;
            d.nb[3] = ne[1] * d.nb[1];
        }
        Ok(t)
    }

    /// A transposed 1-D convolution (ggml's `ggml_conv_transpose_1d`, which
    /// allows only padding 0 and dilation 1): `kernel` `[K, OC, IC]` (F32
    /// or F16), `input` the F32 matrix `[L, IC]`; the result is F32 `[(L -
    /// 1)·stride + K, OC]`.
    pub fn conv_transpose_1d(&mut self, kernel: TensorId, input: TensorId, stride: u32) -> Result<TensorId> {
        const OP: &str = "CONV_TRANSPOSE_1D";
        let dk = self.expect_dtype(OP, kernel, &[DType::F32, DType::F16])?;
        let di = self.expect_dtype(OP, input, &[DType::F32])?;
        if stride == 0 {
            return Err(op_err!(OP, "stride of {} must be at least 1", self.describe(input)));
        }
        if di.ne[2] != 1 || di.ne[3] != 1 || dk.ne[3] != 1 || dk.ne[2] != di.ne[1] {
            return Err(op_err!(
                OP,
                "kernel {} must be [K, OC, IC] and input {} the matrix [L, IC]",
                self.describe(kernel),
                self.describe(input)
            ));
        }
        let len = transposed_len(di.ne[0], dk.ne[0], stride)
            .ok_or_else(|| op_err!(OP, "the result of {} with stride {stride} overflows", self.describe(input)))?;
        self.push_op(DType::F32, [len, dk.ne[1], 1, 1], Op::ConvTranspose1d { stride }, &[kernel, input])
    }

    /// A transposed 2-D convolution without padding (ggml's
    /// `ggml_conv_transpose_2d_p0`): `kernel` `[KW, KH, OC, IC]` (F32 or
    /// F16), `input` F32 `[W, H, IC, N]`; the result is F32 `[(W - 1)·s +
    /// KW, (H - 1)·s + KH, OC, N]`.
    pub fn conv_transpose_2d(&mut self, kernel: TensorId, input: TensorId, stride: u32) -> Result<TensorId> {
        const OP: &str = "CONV_TRANSPOSE_2D";
        let dk = self.expect_dtype(OP, kernel, &[DType::F32, DType::F16])?;
        let di = self.expect_dtype(OP, input, &[DType::F32])?;
        if stride == 0 {
            return Err(op_err!(OP, "stride of {} must be at least 1", self.describe(input)));
        }
        if dk.ne[3] != di.ne[2] {
            return Err(op_err!(
                OP,
                "kernel {} must be [KW, KH, OC, IC] with IC the channels (dim 2) of {}",
                self.describe(kernel),
                self.describe(input)
            ));
        }
        let out = |i: usize| {
            transposed_len(di.ne[i], dk.ne[i], stride)
                .ok_or_else(|| op_err!(OP, "the result of {} with stride {stride} overflows", self.describe(input)))
        };
        let ne = [out(0)?, out(1)?, dk.ne[2], di.ne[3]];
        self.push_op(DType::F32, ne, Op::ConvTranspose2d { stride }, &[kernel, input])
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, ConvParams, DType, Error};

    #[test]
    fn shapes_and_errors() {
        let mut ctx = Context::new();
        let k = ctx.tensor(DType::F32, [3, 3, 4, 8]).unwrap();
        let x = ctx.tensor(DType::F32, [9, 7, 4, 2]).unwrap();
        let conv = ConvParams { stride: [2, 1], pad: [1, 0], dilation: [1, 2] };
        let d = ctx.conv_2d_direct(k, x, conv).unwrap();
        assert_eq!(ctx.desc(d).unwrap().ne, [5, 3, 8, 2]);
        let g = ctx.conv_2d(k, x, conv).unwrap();
        assert_eq!(ctx.desc(g).unwrap().ne, [5, 3, 8, 2]);
        let c = ctx.im2col(k, x, conv, true, DType::F16).unwrap();
        assert_eq!((ctx.desc(c).unwrap().ne, ctx.desc(c).unwrap().dtype), ([36, 5, 3, 2], DType::F16));
        // 1-D: [K, IC, OC] over [L, IC, N].
        let k1 = ctx.tensor(DType::F16, [3, 4, 5]).unwrap();
        let x1 = ctx.tensor(DType::F32, [10, 4, 2]).unwrap();
        let c1 = ctx.im2col(k1, x1, ConvParams::UNIT, false, DType::F32).unwrap();
        assert_eq!(ctx.desc(c1).unwrap().ne, [12, 8, 2, 1]);
        // The kernel must fit the padded image; channels must agree.
        let big = ctx.tensor(DType::F32, [12, 3, 4, 8]).unwrap();
        assert!(matches!(ctx.conv_2d_direct(big, x, ConvParams::UNIT), Err(Error::InvalidOp { op: "CONV_2D", .. })));
        let k5 = ctx.tensor(DType::F32, [3, 3, 5, 8]).unwrap();
        assert!(matches!(
            ctx.im2col(k5, x, ConvParams::UNIT, true, DType::F32),
            Err(Error::InvalidOp { op: "IM2COL", .. })
        ));
        let zero = ConvParams { stride: [0, 1], ..ConvParams::UNIT };
        assert!(ctx.conv_2d_direct(k, x, zero).is_err());
        // Depthwise, and its channel-adjacent layout.
        let kd = ctx.tensor(DType::F32, [3, 3, 1, 4]).unwrap();
        let dw = ctx.conv_2d_dw_direct(kd, x, ConvParams::square(1, 1, 1)).unwrap();
        assert_eq!(ctx.desc(dw).unwrap().ne, [9, 7, 4, 2]);
        assert!(ctx.desc(dw).unwrap().is_contiguous());
        let stored = ctx.tensor(DType::F32, [4, 9, 7, 2]).unwrap(); // C, W, H, N
        let cwhn = ctx.permute(stored, [2, 0, 1, 3]).unwrap();
        let dw = ctx.conv_2d_dw_direct(kd, cwhn, ConvParams::square(1, 1, 1)).unwrap();
        assert_eq!(ctx.desc(dw).unwrap().nb, [16, 144, 4, 1008]);
        assert!(ctx.conv_2d_dw_direct(k, x, ConvParams::UNIT).is_err());
        // Transposed.
        let kt = ctx.tensor(DType::F32, [3, 5, 4]).unwrap();
        let xt = ctx.tensor(DType::F32, [6, 4]).unwrap();
        let t1 = ctx.conv_transpose_1d(kt, xt, 2).unwrap();
        assert_eq!(ctx.desc(t1).unwrap().ne, [13, 5, 1, 1]);
        assert!(ctx.conv_transpose_1d(kt, x, 2).is_err());
        let kt2 = ctx.tensor(DType::F16, [3, 2, 6, 4]).unwrap();
        let t2 = ctx.conv_transpose_2d(kt2, x, 2).unwrap();
        assert_eq!(ctx.desc(t2).unwrap().ne, [19, 14, 6, 2]);
        assert!(matches!(ctx.conv_transpose_2d(k, x, 1), Err(Error::InvalidOp { op: "CONV_TRANSPOSE_2D", .. })));
    }
}
