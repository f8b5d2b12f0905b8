//! The op set. Semantics follow ggml's op of the same name, so graphs and
//! models port one to one; each op's builder (in [`crate::ops`]) documents
//! its shapes.

/// Element-wise unary functions (ggml's `GGML_OP_UNARY` family plus
/// `SQR`, `SQRT`, `LOG`, which ggml keeps as ops of their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `|x|`
    Abs,
    /// `x * x`
    Sqr,
    /// `sqrt(x)`
    Sqrt,
    /// `e^x`
    Exp,
    /// `ln(x)`
    Log,
    /// `tanh(x)`
    Tanh,
    /// `max(x, 0)`
    Relu,
    /// GELU, tanh approximation (ggml's `gelu`).
    Gelu,
    /// GELU with the exact error function.
    GeluErf,
    /// `x * sigmoid(x)`
    Silu,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `sin(x)` (ggml's `GGML_OP_SIN`, an op of its own there).
    Sin,
    /// `cos(x)` (ggml's `GGML_OP_COS`, an op of its own there).
    Cos,
    /// `ln(1 + e^x)`, and `x` itself above 20 (ggml's shortcut, where the
    /// two agree to f32 precision and `e^x` would overflow sooner or later).
    Softplus,
    /// `x` above 0, else `e^x - 1`.
    Elu,
    /// `x * min(1, max(0, (x + 3) / 6))`
    Hardswish,
    /// `min(1, max(0, (x + 3) / 6))`
    Hardsigmoid,
    /// `x * sigmoid(1.702 x)`, GELU's sigmoid approximation.
    GeluQuick,
    /// 1 above 0, else 0 (NaN gives 0).
    Step,
    /// The sign: -1, 0 or 1 (NaN gives 0).
    Sgn,
    /// Round to the nearest integer, halves away from zero (C's `roundf`).
    Round,
    /// Round down.
    Floor,
    /// Round up.
    Ceil,
    /// Round towards zero.
    Trunc,
    /// `e^x - 1`
    Expm1,
}

impl UnaryOp {
    /// Every unary op.
    ///
    /// New ops go at the end: a position here is the op's code on the remote
    /// backend's wire and in the CUDA kernels, so existing codes never move.
    pub const ALL: [UnaryOp; 26] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sqr,
        UnaryOp::Sqrt,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Tanh,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::GeluErf,
        UnaryOp::Silu,
        UnaryOp::Sigmoid,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Softplus,
        UnaryOp::Elu,
        UnaryOp::Hardswish,
        UnaryOp::Hardsigmoid,
        UnaryOp::GeluQuick,
        UnaryOp::Step,
        UnaryOp::Sgn,
        UnaryOp::Round,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Trunc,
        UnaryOp::Expm1,
    ];

    /// ggml's name.
    pub const fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "NEG",
            UnaryOp::Abs => "ABS",
            UnaryOp::Sqr => "SQR",
            UnaryOp::Sqrt => "SQRT",
            UnaryOp::Exp => "EXP",
            UnaryOp::Log => "LOG",
            UnaryOp::Tanh => "TANH",
            UnaryOp::Relu => "RELU",
            UnaryOp::Gelu => "GELU",
            UnaryOp::GeluErf => "GELU_ERF",
            UnaryOp::Silu => "SILU",
            UnaryOp::Sigmoid => "SIGMOID",
            UnaryOp::Sin => "SIN",
            UnaryOp::Cos => "COS",
            UnaryOp::Softplus => "SOFTPLUS",
            UnaryOp::Elu => "ELU",
            UnaryOp::Hardswish => "HARDSWISH",
            UnaryOp::Hardsigmoid => "HARDSIGMOID",
            UnaryOp::GeluQuick => "GELU_QUICK",
            UnaryOp::Step => "STEP",
            UnaryOp::Sgn => "SGN",
            UnaryOp::Round => "ROUND",
            UnaryOp::Floor => "FLOOR",
            UnaryOp::Ceil => "CEIL",
            UnaryOp::Trunc => "TRUNC",
            UnaryOp::Expm1 => "EXPM1",
        }
    }
}

/// Element-wise binary ops with `src1` broadcast over `src0` by repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 4] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];

    /// ggml's name.
    pub const fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "ADD",
            BinaryOp::Sub => "SUB",
            BinaryOp::Mul => "MUL",
            BinaryOp::Div => "DIV",
        }
    }

    /// Applies the op to two scalars.
    #[inline(always)]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
        }
    }
}

/// The activation of a gated linear unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GluOp {
    /// `silu(x) * g`
    Swiglu,
    /// `gelu(x) * g` (tanh approximation)
    Geglu,
    /// `max(x, 0) * g`
    Reglu,
    /// `gelu_erf(x) * g` (GELU with the exact error function)
    GegluErf,
    /// `gelu_quick(x) * g` (`x * sigmoid(1.702 x)`)
    GegluQuick,
}

impl GluOp {
    /// Every gated linear unit. New ones go at the end: a position here is
    /// the op's code on the remote backend's wire and in the CUDA kernels.
    pub const ALL: [GluOp; 5] = [GluOp::Swiglu, GluOp::Geglu, GluOp::Reglu, GluOp::GegluErf, GluOp::GegluQuick];

    /// ggml's name.
    pub const fn name(self) -> &'static str {
        match self {
            GluOp::Swiglu => "SWIGLU",
            GluOp::Geglu => "GEGLU",
            GluOp::Reglu => "REGLU",
            GluOp::GegluErf => "GEGLU_ERF",
            GluOp::GegluQuick => "GEGLU_QUICK",
        }
    }
}

/// The order ARGSORT sorts each row in (ggml's `ggml_sort_order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortOrder {
    /// Smallest first.
    Asc,
    /// Largest first.
    Desc,
}

impl SortOrder {
    /// ggml's integer code (`GGML_SORT_ORDER_ASC` = 0, `DESC` = 1).
    pub const fn ggml_code(self) -> i32 {
        match self {
            SortOrder::Asc => 0,
            SortOrder::Desc => 1,
        }
    }
}

/// How ROPE pairs up the dimensions it rotates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// Adjacent pairs `(x[2i], x[2i+1])` (ggml mode 0, llama).
    Normal,
    /// Pairs half a rotation apart `(x[i], x[i + n_dims/2])` (ggml mode 2, GPT-NeoX).
    Neox,
}

impl RopeMode {
    /// ggml's integer mode.
    pub const fn ggml_mode(self) -> i32 {
        match self {
            RopeMode::Normal => 0,
            RopeMode::Neox => 2,
        }
    }
}

/// ROPE's parameters (ggml's `ggml_rope_ext`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeParams {
    /// Number of leading dimensions rotated (even); the rest pass through.
    pub n_dims: usize,
    /// Pairing of rotated dimensions.
    pub mode: RopeMode,
    /// Context length the model was trained with (YaRN).
    pub n_ctx_orig: usize,
    /// Frequency base (theta).
    pub freq_base: f32,
    /// Position scale (linear interpolation when < 1).
    pub freq_scale: f32,
    /// YaRN extrapolation mix factor (0 disables YaRN).
    pub ext_factor: f32,
    /// Magnitude scale.
    pub attn_factor: f32,
    /// YaRN low correction dim.
    pub beta_fast: f32,
    /// YaRN high correction dim.
    pub beta_slow: f32,
}

impl RopeParams {
    /// Plain rotary embedding: no scaling, no YaRN.
    ///
    /// ```
    /// use gantry_engine::{RopeParams, RopeMode};
    /// let p = RopeParams::new(64, RopeMode::Normal, 10000.0);
    /// assert_eq!(p.freq_scale, 1.0);
    /// ```
    pub const fn new(n_dims: usize, mode: RopeMode, freq_base: f32) -> Self {
        Self {
            n_dims,
            mode,
            n_ctx_orig: 0,
            freq_base,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
        }
    }

    /// YaRN's correction range `[start, end]` of rotated dimensions (ggml's
    /// `ggml_rope_yarn_corr_dims`): dimensions below `start` extrapolate,
    /// above `end` interpolate, with a linear ramp between. Every backend's
    /// ROPE uses this one definition.
    ///
    /// ```
    /// use gantry_engine::{RopeMode, RopeParams};
    /// let p = RopeParams { n_ctx_orig: 4096, ..RopeParams::new(128, RopeMode::Neox, 10000.0) };
    /// let [start, end] = p.yarn_corr_dims();
    /// assert!(0.0 <= start && start < end && end <= 127.0);
    /// ```
    pub fn yarn_corr_dims(&self) -> [f32; 2] {
        let n_dims = self.n_dims as f32;
        let corr_dim = |n_rot: f32| {
            n_dims * (self.n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln() / (2.0 * self.freq_base.ln())
        };
        let start = corr_dim(self.beta_fast).floor();
        let end = corr_dim(self.beta_slow).ceil();
        [start.max(0.0), end.min(n_dims - 1.0)]
    }
}

/// Stride, padding and dilation of a convolution over the two innermost
/// dims (ggml's `s0, s1, p0, p1, d0, d1`; index 0 is the width). A 1-D
/// convolution uses the first of each and leaves the second at its
/// default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConvParams {
    /// Stride along dims 0 and 1 (at least 1).
    pub stride: [u32; 2],
    /// Zero padding before and after dims 0 and 1.
    pub pad: [u32; 2],
    /// Dilation along dims 0 and 1 (at least 1).
    pub dilation: [u32; 2],
}

impl ConvParams {
    /// Stride 1, no padding, no dilation.
    pub const UNIT: Self = Self { stride: [1, 1], pad: [0, 0], dilation: [1, 1] };

    /// The same stride, padding and dilation along both dims.
    ///
    /// ```
    /// use gantry_engine::ConvParams;
    /// let p = ConvParams::square(2, 1, 1);
    /// assert_eq!(p.stride, [2, 2]);
    /// assert_eq!(p.output_size(0, 8, 3), Some(4));
    /// ```
    pub const fn square(stride: u32, pad: u32, dilation: u32) -> Self {
        Self { stride: [stride, stride], pad: [pad, pad], dilation: [dilation, dilation] }
    }

    /// The output length along `dim` of an input `input` long under a
    /// kernel `kernel` long (ggml's `ggml_calc_conv_output_size`), or
    /// `None` when the padded input is shorter than the dilated kernel.
    pub fn output_size(&self, dim: usize, input: usize, kernel: usize) -> Option<usize> {
        let (s, p, d) = (self.stride[dim] as usize, self.pad[dim] as usize, self.dilation[dim] as usize);
        let span = d.checked_mul(kernel.checked_sub(1)?)?.checked_add(1)?;
        let padded = input.checked_add(2 * p)?;
        (padded >= span && s > 0).then(|| (padded - span) / s + 1)
    }
}

/// How POOL_1D and POOL_2D combine a window (ggml's `ggml_op_pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolOp {
    /// The largest element (`-f32::MAX` over a window of padding only).
    Max,
    /// The mean: POOL_1D over the window's elements inside the input,
    /// POOL_2D over the whole window, padding counted as zeros (as ggml).
    Avg,
}

impl PoolOp {
    /// ggml's integer code (`GGML_OP_POOL_MAX` = 0, `AVG` = 1).
    pub const fn ggml_code(self) -> i32 {
        match self {
            PoolOp::Max => 0,
            PoolOp::Avg => 1,
        }
    }
}

/// How UPSCALE samples its source (ggml's `ggml_scale_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScaleMode {
    /// The source element each result element falls in.
    Nearest,
    /// Linear along dims 0 and 1 between the four nearest source elements,
    /// clamped at the edges; nearest along dims 2 and 3.
    Bilinear,
}

impl ScaleMode {
    /// ggml's integer code (`GGML_SCALE_MODE_NEAREST` = 0, `BILINEAR` = 1).
    pub const fn ggml_code(self) -> i32 {
        match self {
            ScaleMode::Nearest => 0,
            ScaleMode::Bilinear => 1,
        }
    }
}

/// Which triangle of each matrix TRI keeps (ggml's `ggml_tri_type`), for
/// element `[i0, i1]` (column, row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TriType {
    /// `i0 >= i1`: the diagonal and above.
    UpperDiag,
    /// `i0 > i1`: above the diagonal.
    Upper,
    /// `i0 <= i1`: the diagonal and below.
    LowerDiag,
    /// `i0 < i1`: below the diagonal.
    Lower,
}

impl TriType {
    /// Every kind, in ggml's order: a position here is its code on the wire.
    pub const ALL: [TriType; 4] = [TriType::UpperDiag, TriType::Upper, TriType::LowerDiag, TriType::Lower];

    /// Whether element `[i0, i1]` is kept.
    #[inline]
    pub const fn keeps(self, i0: usize, i1: usize) -> bool {
        match self {
            TriType::UpperDiag => i0 >= i1,
            TriType::Upper => i0 > i1,
            TriType::LowerDiag => i0 <= i1,
            TriType::Lower => i0 < i1,
        }
    }
}

/// The op that computes a tensor, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// A leaf: input, weight or constant.
    None,
    /// A strided view of `src0`.
    View,
    /// `src0` with another shape (`src0` contiguous).
    Reshape,
    /// `src0` with its dimensions reordered; `axes[i]` is where dim `i` goes.
    Permute {
        /// Destination position of each source dimension.
        axes: [u8; 4],
    },
    /// `src0` with dims 0 and 1 swapped.
    Transpose,
    /// Copy `src0` into `src1` converting the dtype; the result is a view of `src1`.
    Cpy,
    /// A contiguous copy of `src0`, possibly reshaped.
    Cont,
    /// A contiguous copy of `src0` with the same shape.
    Dup,
    /// Rows of `src0` picked by the I32 indices `src1`; F32 (I32 for I32 `src0`).
    GetRows,
    /// Writes the F32 rows `src0` into the destination (viewed) at the I32 row indices `src1`.
    SetRows,
    /// `src0 (op) src1` with `src1` repeated over `src0`.
    Binary(BinaryOp),
    /// `src0 * scale + bias`.
    Scale {
        /// Multiplier.
        scale: f32,
        /// Added after scaling.
        bias: f32,
    },
    /// `min(max(src0, min), max)`.
    Clamp {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
    },
    /// `x` where positive, `negative_slope * x` where negative (ggml's
    /// `GGML_OP_LEAKY_RELU`).
    LeakyRelu {
        /// Multiplies the negative elements.
        negative_slope: f32,
    },
    /// An element-wise function.
    Unary(UnaryOp),
    /// A gated linear unit: fused (`src0` holds both halves) or split (`src1` is the gate).
    Glu {
        /// The activation.
        op: GluOp,
        /// Fused form: activate the second half and gate with the first.
        swapped: bool,
    },
    /// Sum of all elements (a 1-element tensor).
    Sum,
    /// Sum of each row.
    SumRows,
    /// Mean of each row (F32).
    Mean,
    /// Index of the largest element of each row (I32); `src0` a matrix.
    Argmax,
    /// `(x - mean) / sqrt(var + eps)` per row.
    Norm {
        /// Added to the variance.
        eps: f32,
    },
    /// `x / sqrt(mean(x^2) + eps)` per row.
    RmsNorm {
        /// Added to the mean square.
        eps: f32,
    },
    /// `softmax(x * scale + slope * mask)` per row; `src1` the optional mask.
    SoftMax {
        /// Multiplies the logits.
        scale: f32,
        /// ALiBi maximum bias (0 = off).
        max_bias: f32,
    },
    /// Sets `x[i, j] = -inf` where `i > n_past + j` (column past the diagonal).
    DiagMaskInf {
        /// Number of past positions visible to every row.
        n_past: usize,
    },
    /// Rotary position embedding; `src1` I32 positions, `src2` optional frequency factors.
    Rope(RopeParams),
    /// Matrix product `src0^T * src1` (F32), batched over dims 2 and 3.
    MulMat,
    /// `src0` and `src1` joined along `dim`.
    Concat {
        /// The dimension joined along.
        dim: u8,
    },
    /// `src0` tiled to the result's shape.
    Repeat,
    /// Mixture-of-experts product (ggml's `GGML_OP_MUL_MAT_ID`): srcs the
    /// expert weights `[k, m, n_expert]`, the F32 activations `[k, n_b,
    /// n_tokens]` and the I32 expert ids `[n_used, n_tokens]`; slot `e` of
    /// token `t` is expert `ids[e, t]`'s weights times activation row `e %
    /// n_b` of token `t`.
    MulMatId,
    /// `src0[:, e, t] + src1[:, src2[e, t]]`: a per-expert bias picked by the
    /// I32 ids (ggml's `GGML_OP_ADD_ID`).
    AddId,
    /// The indices (I32) that sort each row.
    Argsort {
        /// Ascending or descending.
        order: SortOrder,
    },
    /// The indices (I32) of the `ne0` largest elements of each row, largest
    /// first (ggml leaves their order unspecified).
    TopK,
    /// Inclusive running sum along each row.
    Cumsum,
    /// gpt-oss's gated unit: `x = min(a, limit)`, `g = clamp(b, -limit,
    /// limit)`, `x * sigmoid(alpha * x) * (g + 1)`; fused (`src0` holds both
    /// halves) or split (`src1` is the gate).
    SwigluOai {
        /// Multiplies `x` inside the sigmoid.
        alpha: f32,
        /// Clamps `x` from above and the gate on both sides.
        limit: f32,
        /// Fused form: `x` is the second half and the gate the first.
        swapped: bool,
    },
    /// Image patches as rows (ggml's `GGML_OP_IM2COL`): srcs the kernel
    /// (only its shape counts) and the image; F32 or F16 result.
    Im2col {
        /// Stride, padding, dilation.
        conv: ConvParams,
        /// Two-dimensional (else 1-D over dim 0).
        is_2d: bool,
    },
    /// Direct 2-D convolution: srcs the kernel `[KW, KH, IC, OC]` and the
    /// image `[W, H, IC, N]`.
    Conv2d(ConvParams),
    /// Depthwise 2-D convolution: srcs the kernel `[KW, KH, 1, C]` and the
    /// image `[W, H, C, N]`.
    Conv2dDw(ConvParams),
    /// Transposed 1-D convolution: srcs the kernel `[K, OC, IC]` and the
    /// input `[L, IC]` (ggml's padding 0, dilation 1).
    ConvTranspose1d {
        /// Stride.
        stride: u32,
    },
    /// Transposed 2-D convolution: srcs the kernel `[KW, KH, OC, IC]` and
    /// the input `[W, H, IC, N]` (ggml's `conv_transpose_2d_p0`).
    ConvTranspose2d {
        /// Stride along both dims.
        stride: u32,
    },
    /// Pooling along dim 0 of each row.
    Pool1d {
        /// Max or average.
        op: PoolOp,
        /// Window length.
        k: u32,
        /// Stride.
        s: u32,
        /// Padding before and after.
        p: u32,
    },
    /// Pooling over dims 0 and 1 of each plane.
    Pool2d {
        /// Max or average.
        op: PoolOp,
        /// Window size along dims 0 and 1.
        k: [u32; 2],
        /// Stride along dims 0 and 1.
        s: [u32; 2],
        /// Padding along dims 0 and 1.
        p: [u32; 2],
    },
    /// Resampling to the result's shape (ggml's `GGML_OP_UPSCALE`).
    Upscale {
        /// Nearest or bilinear.
        mode: ScaleMode,
        /// Bilinear with the corner elements of source and result aligned
        /// (ggml's `GGML_SCALE_FLAG_ALIGN_CORNERS`).
        align_corners: bool,
    },
    /// Padding before (`lp`) and after (`rp`) each dim: zeros, or the
    /// source wrapped around (`circular`, ggml's `pad_ext_circular`).
    Pad {
        /// Elements added before each dim.
        lp: [u32; 4],
        /// Elements added after each dim.
        rp: [u32; 4],
        /// Wrap the source around instead of padding with zeros.
        circular: bool,
    },
    /// Reflection padding along dim 0 (the edge element not repeated).
    PadReflect1d {
        /// Elements added before.
        p0: u32,
        /// Elements added after.
        p1: u32,
    },
    /// Elements moved `shift[i]` places along each dim, wrapping around.
    Roll {
        /// Shift per dim (negative: towards index 0).
        shift: [i32; 4],
    },
    /// Normalization over groups of channels (dim 2) of each sample (dim 3).
    GroupNorm {
        /// Number of groups (`ceil(channels / groups)` channels each).
        n_groups: u32,
        /// Added to the variance.
        eps: f32,
    },
    /// `x / max(|x|, eps)` per row (`|x|` the Euclidean norm).
    L2Norm {
        /// Lower bound of the norm.
        eps: f32,
    },
    /// `start + step * i` for `i` in `0..ceil((stop - start) / step)`; no sources.
    Arange {
        /// First value.
        start: f32,
        /// Bound the values stay below.
        stop: f32,
        /// Step.
        step: f32,
    },
    /// Sinusoidal embeddings of the F32 timesteps `src0` (`[n]`): `[dim, n]`,
    /// cosines then sines of `t * max_period^(-j / (dim / 2))`.
    TimestepEmbedding {
        /// Embedding length.
        dim: u32,
        /// The longest period.
        max_period: i32,
    },
    /// xIELU (ggml's `ggml_xielu`), with ggml's stored parameters:
    /// `alpha_p·x² + beta·x` above 0, else `(expm1(min(x, eps)) - x)·alpha_n
    /// + beta·x`.
    Xielu {
        /// `beta + softplus(alpha_n)` of the builder's arguments.
        alpha_n: f32,
        /// `softplus(alpha_p)` of the builder's arguments.
        alpha_p: f32,
        /// The linear term.
        beta: f32,
        /// Bounds `x` inside `expm1`.
        eps: f32,
    },
    /// `src0`'s shape filled with `c`.
    Fill {
        /// The value.
        c: f32,
    },
    /// One triangle of each matrix of `src0`, zeros elsewhere.
    Tri(TriType),
    /// The vectors `src0` (`[n, 1, ...]`) as diagonal matrices `[n, n, ...]`.
    Diag,
    /// Sets `x[i, j] = 0` where `i > n_past + j`.
    DiagMaskZero {
        /// Number of past positions visible to every row.
        n_past: usize,
    },
    /// `src0` with `src1` written over its view at byte `offset` with strides `nb`.
    Set {
        /// Byte strides of dims 1, 2, 3 of the view.
        nb: [usize; 3],
        /// Byte offset of the view.
        offset: usize,
    },
    /// `src0` with `src1` added to its view at byte `offset` with strides `nb`.
    Acc {
        /// Byte strides of dims 1, 2, 3 of the view.
        nb: [usize; 3],
        /// Byte offset of the view.
        offset: usize,
    },
    /// `src0 + src1[0]`, the one element of `src1` added to every element.
    Add1,
    /// The number of positions where the I32 `src0` and `src1` are equal.
    CountEqual,
    /// Mamba's depthwise causal convolution (ggml's `ggml_ssm_conv`): srcs
    /// `sx` `[d_conv - 1 + n_t, d_inner, n_s]` and `c` `[d_conv, d_inner]`,
    /// result `[d_inner, n_t, n_s]` with `out[i, t, s] = Σ_k sx[t + k, i, s]
    /// · c[k, i]`.
    SsmConv,
    /// Mamba's selective scan (ggml's `ggml_ssm_scan`): srcs state `s`, `x`,
    /// `dt`, `A`, `B`, `C` and the I32 `ids` that pick each sequence's
    /// initial state; a 1-D result holding `y` and then `states` snapshots of
    /// the final states.
    SsmScan {
        /// How many states each sequence keeps: the last one, then those
        /// 1, 2, ... tokens before the end (ggml's `K`).
        states: u32,
    },
    /// `X` with `A X = B` for each lower-triangular `A` (`src0`, `[n, n,
    /// ...]`, element `[t, i]` in row `i`) and right-hand sides `B`
    /// (`src1`, `[k, n, ...]`, a column per `k`), by forward substitution
    /// (ggml's `ggml_solve_tri`, left, lower, non-unit diagonal).
    SolveTri,
    /// RWKV-6's time mixing (ggml's `ggml_rwkv_wkv6`): srcs `k`, `v`, `r`
    /// (`[S, H, T]`), the per-channel bonus `tf` (`[S, H]`), the per-token
    /// decay `td` (`[S, H, T]`) and the states (`S · S · H` floats per
    /// sequence, `n_seqs` in dim 1), the `T` tokens split evenly over the
    /// sequences. Result `[S · H, T + S · n_seqs]`: the outputs, then the
    /// new states.
    RwkvWkv6,
    /// Gated linear attention (ggml's `ggml_gated_linear_attn`): srcs `k`,
    /// `v`, `q`, the gate `g` (`[S, H, T]`) and the states, laid out as
    /// [`Op::RwkvWkv6`]'s; `q` is scaled by `scale`.
    GatedLinearAttn {
        /// Multiplies `q`.
        scale: f32,
    },
    /// RWKV-7's time mixing (ggml's `ggml_rwkv_wkv7`): srcs `r`, `w`, `k`,
    /// `v`, `a`, `b` (`[S, H, T]`) and the states, laid out as
    /// [`Op::RwkvWkv6`]'s.
    RwkvWkv7,
    /// The gated delta rule (ggml's `ggml_gated_delta_net`, Qwen3-Next's and
    /// Kimi's linear attention): srcs `q`, `k` (`[S, H_qk, T, n_seqs_qk]`),
    /// `v` (`[S, H, T, n_seqs]`), the gate `g` (`[1 or S, H, T, n_seqs]`),
    /// `beta` (`[1, H, T, n_seqs]`) and the initial states (`[S, S, H,
    /// n_seqs]`). Result `[S · H, T · n_seqs + states · S · n_seqs]`: the
    /// outputs, then `states` snapshots of the states.
    GatedDeltaNet {
        /// How many states each sequence keeps: the last one, then those 1,
        /// 2, ... tokens before the end (ggml's `K`).
        states: u32,
    },
    /// Cuts an image `[C, W, H]` into `w × w` windows, zero-padded at the
    /// right and bottom (ggml's `ggml_win_part`, SAM's window attention):
    /// result `[C, w, w, npx · npy]`, window `py · npx + px`.
    WinPart {
        /// Windows across.
        npx: u32,
        /// Windows down.
        npy: u32,
        /// The window's side.
        w: u32,
    },
    /// Puts `w × w` windows (`[C, w, w, n]`) back into an image `[C, W, H]`,
    /// dropping the padding (ggml's `ggml_win_unpart`).
    WinUnpart {
        /// The window's side.
        w: u32,
    },
    /// SAM's relative-position table (ggml's `ggml_get_rel_pos`): from F16
    /// embeddings `[C, 2 · n - 1]`, the F16 result `[C, n, n]` with
    /// `out[c, k, q] = src[c, n - 1 - k + q]`.
    GetRelPos,
    /// SAM's decomposed relative positions added to attention scores
    /// (ggml's `ggml_add_rel_pos`): srcs the scores `[n · n, n_w · n_h, B]`,
    /// `pw` and `ph` (`[n, n_w, n_h, B]`); `out[y · n + x, q, b] = a + ph[y,
    /// q, b] + pw[x, q, b]`.
    AddRelPos,
    /// Fused attention: `softmax(Q K^T * scale + mask) V`; srcs Q, K, V, optional mask.
    FlashAttnExt {
        /// Multiplies `Q K^T`.
        scale: f32,
        /// ALiBi maximum bias (0 = off).
        max_bias: f32,
        /// Logit soft-capping (0 = off): `s = softcap * tanh(s / softcap)`.
        softcap: f32,
    },
}

impl Op {
    /// ggml's name of the op (`"MUL_MAT"`, `"SILU"`, ...).
    pub const fn name(&self) -> &'static str {
        match self {
            Op::None => "NONE",
            Op::View => "VIEW",
            Op::Reshape => "RESHAPE",
            Op::Permute { .. } => "PERMUTE",
            Op::Transpose => "TRANSPOSE",
            Op::Cpy => "CPY",
            Op::Cont => "CONT",
            Op::Dup => "DUP",
            Op::GetRows => "GET_ROWS",
            Op::SetRows => "SET_ROWS",
            Op::Binary(b) => b.name(),
            Op::Scale { .. } => "SCALE",
            Op::Clamp { .. } => "CLAMP",
            Op::LeakyRelu { .. } => "LEAKY_RELU",
            Op::Unary(u) => u.name(),
            Op::Glu { op, .. } => op.name(),
            Op::Sum => "SUM",
            Op::SumRows => "SUM_ROWS",
            Op::Mean => "MEAN",
            Op::Argmax => "ARGMAX",
            Op::Norm { .. } => "NORM",
            Op::RmsNorm { .. } => "RMS_NORM",
            Op::SoftMax { .. } => "SOFT_MAX",
            Op::DiagMaskInf { .. } => "DIAG_MASK_INF",
            Op::Rope(_) => "ROPE",
            Op::MulMat => "MUL_MAT",
            Op::Concat { .. } => "CONCAT",
            Op::Repeat => "REPEAT",
            Op::MulMatId => "MUL_MAT_ID",
            Op::AddId => "ADD_ID",
            Op::Argsort { .. } => "ARGSORT",
            Op::TopK => "TOP_K",
            Op::Cumsum => "CUMSUM",
            Op::SwigluOai { .. } => "SWIGLU_OAI",
            Op::FlashAttnExt { .. } => "FLASH_ATTN_EXT",
            Op::Im2col { .. } => "IM2COL",
            Op::Conv2d(_) => "CONV_2D",
            Op::Conv2dDw(_) => "CONV_2D_DW",
            Op::ConvTranspose1d { .. } => "CONV_TRANSPOSE_1D",
            Op::ConvTranspose2d { .. } => "CONV_TRANSPOSE_2D",
            Op::Pool1d { .. } => "POOL_1D",
            Op::Pool2d { .. } => "POOL_2D",
            Op::Upscale { .. } => "UPSCALE",
            Op::Pad { .. } => "PAD",
            Op::PadReflect1d { .. } => "PAD_REFLECT_1D",
            Op::Roll { .. } => "ROLL",
            Op::GroupNorm { .. } => "GROUP_NORM",
            Op::L2Norm { .. } => "L2_NORM",
            Op::Arange { .. } => "ARANGE",
            Op::TimestepEmbedding { .. } => "TIMESTEP_EMBEDDING",
            Op::Xielu { .. } => "XIELU",
            Op::Fill { .. } => "FILL",
            Op::Tri(_) => "TRI",
            Op::Diag => "DIAG",
            Op::DiagMaskZero { .. } => "DIAG_MASK_ZERO",
            Op::Set { .. } => "SET",
            Op::Acc { .. } => "ACC",
            Op::Add1 => "ADD1",
            Op::CountEqual => "COUNT_EQUAL",
            Op::SsmConv => "SSM_CONV",
            Op::SsmScan { .. } => "SSM_SCAN",
            Op::SolveTri => "SOLVE_TRI",
            Op::RwkvWkv6 => "RWKV_WKV6",
            Op::GatedLinearAttn { .. } => "GATED_LINEAR_ATTN",
            Op::RwkvWkv7 => "RWKV_WKV7",
            Op::GatedDeltaNet { .. } => "GATED_DELTA_NET",
            Op::WinPart { .. } => "WIN_PART",
            Op::WinUnpart { .. } => "WIN_UNPART",
            Op::GetRelPos => "GET_REL_POS",
            Op::AddRelPos => "ADD_REL_POS",
        }
    }

    /// Whether the op computes nothing: a leaf or a view (ggml's `ggml_op_is_empty`).
    pub const fn is_empty(&self) -> bool {
        matches!(self, Op::None | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose)
    }

    /// Whether the op may write its result over its first source's memory
    /// (each element read before its position is written), so an allocator
    /// may reuse it: ggml-alloc's `ggml_op_can_inplace` list.
    pub const fn can_run_in_place(&self) -> bool {
        matches!(
            self,
            Op::Binary(_)
                | Op::AddId
                | Op::Scale { .. }
                | Op::Clamp { .. }
                | Op::LeakyRelu { .. }
                | Op::Unary(_)
                | Op::RmsNorm { .. }
                | Op::SoftMax { .. }
                | Op::DiagMaskInf { .. }
                | Op::Rope(_)
        )
    }

    /// Every op name, for listings and `--op` filters.
    pub const NAMES: [&'static str; 102] = [
        "NONE",
        "VIEW",
        "RESHAPE",
        "PERMUTE",
        "TRANSPOSE",
        "CPY",
        "CONT",
        "DUP",
        "GET_ROWS",
        "SET_ROWS",
        "ADD",
        "SUB",
        "MUL",
        "DIV",
        "SCALE",
        "CLAMP",
        "NEG",
        "ABS",
        "SQR",
        "SQRT",
        "EXP",
        "LOG",
        "TANH",
        "RELU",
        "GELU",
        "GELU_ERF",
        "SILU",
        "SIGMOID",
        "SIN",
        "COS",
        "SOFTPLUS",
        "ELU",
        "HARDSWISH",
        "HARDSIGMOID",
        "GELU_QUICK",
        "STEP",
        "SGN",
        "ROUND",
        "FLOOR",
        "CEIL",
        "TRUNC",
        "EXPM1",
        "LEAKY_RELU",
        "SWIGLU",
        "GEGLU",
        "REGLU",
        "GEGLU_ERF",
        "GEGLU_QUICK",
        "SUM",
        "SUM_ROWS",
        "MEAN",
        "ARGMAX",
        "NORM",
        "RMS_NORM",
        "SOFT_MAX",
        "DIAG_MASK_INF",
        "ROPE",
        "MUL_MAT",
        "CONCAT",
        "REPEAT",
        "MUL_MAT_ID",
        "ADD_ID",
        "ARGSORT",
        "TOP_K",
        "CUMSUM",
        "SWIGLU_OAI",
        "FLASH_ATTN_EXT",
        "IM2COL",
        "CONV_2D",
        "CONV_2D_DW",
        "CONV_TRANSPOSE_1D",
        "CONV_TRANSPOSE_2D",
        "POOL_1D",
        "POOL_2D",
        "UPSCALE",
        "PAD",
        "PAD_REFLECT_1D",
        "ROLL",
        "GROUP_NORM",
        "L2_NORM",
        "ARANGE",
        "TIMESTEP_EMBEDDING",
        "XIELU",
        "FILL",
        "TRI",
        "DIAG",
        "DIAG_MASK_ZERO",
        "SET",
        "ACC",
        "ADD1",
        "COUNT_EQUAL",
        "SSM_CONV",
        "SSM_SCAN",
        "SOLVE_TRI",
        "RWKV_WKV6",
        "GATED_LINEAR_ATTN",
        "RWKV_WKV7",
        "GATED_DELTA_NET",
        "WIN_PART",
        "WIN_UNPART",
        "GET_REL_POS",
        "ADD_REL_POS",
    ];
}
