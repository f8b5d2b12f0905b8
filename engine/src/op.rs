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
    pub const NAMES: [&'static str; 67] = [
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
    ];
}
