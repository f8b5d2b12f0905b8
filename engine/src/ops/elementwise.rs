//! Element-wise ops: ADD, SUB, MUL, DIV, SCALE, CLAMP, LEAKY_RELU, the unary
//! functions and the gated linear units (SWIGLU, GEGLU, REGLU, GEGLU_ERF,
//! GEGLU_QUICK).

use gantry_arenas::TensorId;

use super::FLOATS;
use crate::context::ViewLayout;
use crate::{BinaryOp, Context, DType, GluOp, Op, Result, UnaryOp, op_err};

impl Context {
    /// `a (op) b` with `b` repeated over `a` (every dim of `a` a multiple of
    /// `b`'s). The result has `a`'s shape and dtype; `b` is F32 or `a`'s dtype.
    pub fn binary(&mut self, op: BinaryOp, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary_impl(op, a, b, false)
    }

    /// [`Context::binary`] writing into `a` (the result is a view of `a`).
    pub fn binary_inplace(&mut self, op: BinaryOp, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary_impl(op, a, b, true)
    }

    fn binary_impl(&mut self, op: BinaryOp, a: TensorId, b: TensorId, inplace: bool) -> Result<TensorId> {
        let name = op.name();
        let da = self.expect_dtype(name, a, FLOATS)?;
        let db = self.expect_dtype(name, b, FLOATS)?;
        if db.dtype != DType::F32 && db.dtype != da.dtype {
            return Err(op_err!(name, "{} must be f32 or {}'s dtype {}", self.describe(b), self.describe(a), da.dtype));
        }
        if !db.can_repeat_to(&da) {
            return Err(op_err!(name, "{} does not repeat into {}", self.describe(b), self.describe(a)));
        }
        self.result_like(a, Op::Binary(op), &[a, b], inplace)
    }

    /// `a + b` (broadcasting `b`).
    pub fn add(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Add, a, b)
    }

    /// `a - b` (broadcasting `b`).
    pub fn sub(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Sub, a, b)
    }

    /// `a * b` (broadcasting `b`).
    pub fn mul(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Mul, a, b)
    }

    /// `a / b` (broadcasting `b`).
    pub fn div(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Div, a, b)
    }

    /// `a * scale + bias`.
    pub fn scale(&mut self, a: TensorId, scale: f32, bias: f32) -> Result<TensorId> {
        self.scale_impl(a, scale, bias, false)
    }

    /// [`Context::scale`] writing into `a`.
    pub fn scale_inplace(&mut self, a: TensorId, scale: f32, bias: f32) -> Result<TensorId> {
        self.scale_impl(a, scale, bias, true)
    }

    fn scale_impl(&mut self, a: TensorId, scale: f32, bias: f32, inplace: bool) -> Result<TensorId> {
        self.expect_dtype("SCALE", a, FLOATS)?;
        // A factor that is not a number makes every value one that is not.
        if !scale.is_finite() || !bias.is_finite() {
            return Err(op_err!("SCALE", "scale {scale} and bias {bias} of {} are not both finite", self.describe(a)));
        }
        self.result_like(a, Op::Scale { scale, bias }, &[a], inplace)
    }

    /// `a` clamped to `[min, max]`.
    pub fn clamp(&mut self, a: TensorId, min: f32, max: f32) -> Result<TensorId> {
        self.expect_dtype("CLAMP", a, FLOATS)?;
        if min.is_nan() || max.is_nan() || min > max {
            return Err(op_err!("CLAMP", "bounds [{min}, {max}] of {} are not an interval", self.describe(a)));
        }
        self.result_like(a, Op::Clamp { min, max }, &[a], false)
    }

    /// `a` where positive, `negative_slope * a` where negative (ggml's
    /// `ggml_leaky_relu`).
    pub fn leaky_relu(&mut self, a: TensorId, negative_slope: f32) -> Result<TensorId> {
        self.leaky_relu_impl(a, negative_slope, false)
    }

    /// [`Context::leaky_relu`] writing into `a`.
    pub fn leaky_relu_inplace(&mut self, a: TensorId, negative_slope: f32) -> Result<TensorId> {
        self.leaky_relu_impl(a, negative_slope, true)
    }

    fn leaky_relu_impl(&mut self, a: TensorId, negative_slope: f32, inplace: bool) -> Result<TensorId> {
        self.expect_dtype("LEAKY_RELU", a, FLOATS)?;
        if !negative_slope.is_finite() {
            return Err(op_err!("LEAKY_RELU", "negative slope {negative_slope} of {} is not finite", self.describe(a)));
        }
        self.result_like(a, Op::LeakyRelu { negative_slope }, &[a], inplace)
    }

    /// The element-wise function `op` of `a`.
    pub fn unary(&mut self, op: UnaryOp, a: TensorId) -> Result<TensorId> {
        self.expect_dtype(op.name(), a, FLOATS)?;
        self.result_like(a, Op::Unary(op), &[a], false)
    }

    /// [`Context::unary`] writing into `a`.
    pub fn unary_inplace(&mut self, op: UnaryOp, a: TensorId) -> Result<TensorId> {
        self.expect_dtype(op.name(), a, FLOATS)?;
        self.result_like(a, Op::Unary(op), &[a], true)
    }

    /// `-a`
    pub fn neg(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Neg, a)
    }
    /// `|a|`
    pub fn abs(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Abs, a)
    }
    /// `a * a`
    pub fn sqr(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Sqr, a)
    }
    /// `sqrt(a)`
    pub fn sqrt(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Sqrt, a)
    }
    /// `e^a`
    pub fn exp(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Exp, a)
    }
    /// `ln(a)`
    pub fn log(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Log, a)
    }
    /// `tanh(a)`
    pub fn tanh(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Tanh, a)
    }
    /// `max(a, 0)`
    pub fn relu(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Relu, a)
    }
    /// GELU (tanh approximation).
    pub fn gelu(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Gelu, a)
    }
    /// GELU (exact, with erf).
    pub fn gelu_erf(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::GeluErf, a)
    }
    /// `a * sigmoid(a)`
    pub fn silu(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Silu, a)
    }
    /// `1 / (1 + e^-a)`
    pub fn sigmoid(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Sigmoid, a)
    }
    /// `sin(a)`
    pub fn sin(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Sin, a)
    }
    /// `cos(a)`
    pub fn cos(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Cos, a)
    }
    /// `ln(1 + e^a)` (`a` itself above 20).
    pub fn softplus(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Softplus, a)
    }
    /// `a` above 0, else `e^a - 1`.
    pub fn elu(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Elu, a)
    }
    /// `a * min(1, max(0, (a + 3) / 6))`
    pub fn hardswish(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Hardswish, a)
    }
    /// `min(1, max(0, (a + 3) / 6))`
    pub fn hardsigmoid(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Hardsigmoid, a)
    }
    /// `a * sigmoid(1.702 a)`
    pub fn gelu_quick(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::GeluQuick, a)
    }
    /// 1 where `a > 0`, else 0.
    pub fn step(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Step, a)
    }
    /// The sign of `a`: -1, 0 or 1.
    pub fn sgn(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Sgn, a)
    }
    /// `a` rounded to the nearest integer, halves away from zero.
    pub fn round(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Round, a)
    }
    /// `a` rounded down.
    pub fn floor(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Floor, a)
    }
    /// `a` rounded up.
    pub fn ceil(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Ceil, a)
    }
    /// `a` rounded towards zero.
    pub fn trunc(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Trunc, a)
    }
    /// `e^a - 1`
    pub fn expm1(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Expm1, a)
    }

    /// Fused gated linear unit: `a`'s rows hold `[x, g]` halves; the result
    /// (half as wide) is `act(x) * g`, or `act(g) * x` when `swapped`.
    pub fn glu(&mut self, op: GluOp, a: TensorId, swapped: bool) -> Result<TensorId> {
        let name = op.name();
        let d = self.expect_dtype(name, a, FLOATS)?;
        self.expect_contiguous_rows(name, a, &d)?;
        if d.ne[0] % 2 != 0 {
            return Err(op_err!(name, "the fused form needs an even row length, {} has {}", self.describe(a), d.ne[0]));
        }
        let mut ne = d.ne;
        ne[0] /= 2;
        self.push_op(d.dtype, ne, Op::Glu { op, swapped }, &[a])
    }

    /// Split gated linear unit: `act(a) * b` (same shape and dtype).
    pub fn glu_split(&mut self, op: GluOp, a: TensorId, b: TensorId) -> Result<TensorId> {
        let name = op.name();
        let da = self.expect_dtype(name, a, FLOATS)?;
        let db = self.src(name, b)?;
        self.expect_contiguous_rows(name, a, &da)?;
        self.expect_contiguous_rows(name, b, &db)?;
        if da.ne != db.ne || da.dtype != db.dtype {
            return Err(op_err!(
                name,
                "{} and {} must have the same shape and dtype",
                self.describe(a),
                self.describe(b)
            ));
        }
        self.push_op(da.dtype, da.ne, Op::Glu { op, swapped: false }, &[a, b])
    }

    /// `silu(x) * g` over the halves of `a`'s rows.
    pub fn swiglu(&mut self, a: TensorId) -> Result<TensorId> {
        self.glu(GluOp::Swiglu, a, false)
    }

    /// `silu(a) * b`.
    pub fn swiglu_split(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.glu_split(GluOp::Swiglu, a, b)
    }

    /// `gelu(x) * g` over the halves of `a`'s rows.
    pub fn geglu(&mut self, a: TensorId) -> Result<TensorId> {
        self.glu(GluOp::Geglu, a, false)
    }

    /// `gelu(a) * b`.
    pub fn geglu_split(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.glu_split(GluOp::Geglu, a, b)
    }

    /// `relu(x) * g` over the halves of `a`'s rows.
    pub fn reglu(&mut self, a: TensorId) -> Result<TensorId> {
        self.glu(GluOp::Reglu, a, false)
    }

    /// `relu(a) * b`.
    pub fn reglu_split(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.glu_split(GluOp::Reglu, a, b)
    }

    /// `gelu_erf(x) * g` over the halves of `a`'s rows.
    pub fn geglu_erf(&mut self, a: TensorId) -> Result<TensorId> {
        self.glu(GluOp::GegluErf, a, false)
    }

    /// `gelu_erf(a) * b`.
    pub fn geglu_erf_split(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.glu_split(GluOp::GegluErf, a, b)
    }

    /// `gelu_quick(x) * g` over the halves of `a`'s rows.
    pub fn geglu_quick(&mut self, a: TensorId) -> Result<TensorId> {
        self.glu(GluOp::GegluQuick, a, false)
    }

    /// `gelu_quick(a) * b`.
    pub fn geglu_quick_split(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.glu_split(GluOp::GegluQuick, a, b)
    }

    /// gpt-oss's gated unit over the halves of the F32 `a`'s rows
    /// (ggml's `ggml_swiglu_oai` with one source): `x` the first half (the
    /// second when `swapped`), `g` the other; see [`Context::swiglu_oai_split`].
    pub fn swiglu_oai(&mut self, a: TensorId, alpha: f32, limit: f32, swapped: bool) -> Result<TensorId> {
        const OP: &str = "SWIGLU_OAI";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        self.expect_contiguous_rows(OP, a, &d)?;
        check_oai_params(alpha, limit)?;
        if d.ne[0] % 2 != 0 {
            return Err(op_err!(OP, "the fused form needs an even row length, {} has {}", self.describe(a), d.ne[0]));
        }
        let mut ne = d.ne;
        ne[0] /= 2;
        self.push_op(DType::F32, ne, Op::SwigluOai { alpha, limit, swapped }, &[a])
    }

    /// gpt-oss's gated unit (ggml's `ggml_swiglu_oai`): with `x = min(a,
    /// limit)` and `g = clamp(b, -limit, limit)`, the result is `x *
    /// sigmoid(alpha * x) * (g + 1)`. `a` and `b` are F32 of one shape with
    /// contiguous rows.
    pub fn swiglu_oai_split(&mut self, a: TensorId, b: TensorId, alpha: f32, limit: f32) -> Result<TensorId> {
        const OP: &str = "SWIGLU_OAI";
        let da = self.expect_dtype(OP, a, &[DType::F32])?;
        let db = self.expect_dtype(OP, b, &[DType::F32])?;
        self.expect_contiguous_rows(OP, a, &da)?;
        self.expect_contiguous_rows(OP, b, &db)?;
        check_oai_params(alpha, limit)?;
        if da.ne != db.ne {
            return Err(op_err!(OP, "{} and {} must have the same shape", self.describe(a), self.describe(b)));
        }
        self.push_op(DType::F32, da.ne, Op::SwigluOai { alpha, limit, swapped: false }, &[a, b])
    }

    /// A result with `a`'s shape and dtype: new and contiguous, or a view of
    /// `a` when computed in place.
    /// xIELU (ggml's `ggml_xielu`): `alpha_p'·x² + beta·x` above 0, else
    /// `(expm1(min(x, eps)) - x)·alpha_n' + beta·x`, with `alpha_p' =
    /// softplus(alpha_p)` and `alpha_n' = beta + softplus(alpha_n)` as ggml
    /// stores them.
    pub fn xielu(&mut self, a: TensorId, alpha_n: f32, alpha_p: f32, beta: f32, eps: f32) -> Result<TensorId> {
        // ggml's softplus: x itself above 20.
        let softplus = |x: f32| if x > 20.0 { x } else { x.exp().ln_1p() };
        self.xielu_stored(a, beta + softplus(alpha_n), softplus(alpha_p), beta, eps)
    }

    /// [`Context::xielu`] from the parameters as ggml stores them (`alpha_n`
    /// and `alpha_p` already through softplus), for graphs rebuilt from
    /// their ops.
    pub fn xielu_stored(&mut self, a: TensorId, alpha_n: f32, alpha_p: f32, beta: f32, eps: f32) -> Result<TensorId> {
        self.expect_dtype("XIELU", a, FLOATS)?;
        if ![alpha_n, alpha_p, beta, eps].iter().all(|v| v.is_finite()) {
            return Err(op_err!("XIELU", "parameters of {} must be finite", self.describe(a)));
        }
        self.result_like(a, Op::Xielu { alpha_n, alpha_p, beta, eps }, &[a], false)
    }

    /// `a + b` with `b` one element (ggml's `ggml_add1`); floats.
    pub fn add1(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.expect_dtype("ADD1", a, FLOATS)?;
        let db = self.expect_dtype("ADD1", b, FLOATS)?;
        if db.nelements() != 1 {
            return Err(op_err!("ADD1", "{} must be a single element", self.describe(b)));
        }
        self.result_like(a, Op::Add1, &[a, b], false)
    }

    pub(crate) fn result_like(&mut self, a: TensorId, op: Op, srcs: &[TensorId], inplace: bool) -> Result<TensorId> {
        let d = self.src(op.name(), a)?;
        if inplace { self.push_view(a, ViewLayout::of(&d), 0, op, srcs) } else { self.push_op(d.dtype, d.ne, op, srcs) }
    }
}

/// SWIGLU_OAI's scalars must be numbers: a NaN limit would clamp nothing
/// and give NaN on one backend and a value on another.
fn check_oai_params(alpha: f32, limit: f32) -> Result<()> {
    if alpha.is_nan() || limit.is_nan() {
        return Err(op_err!("SWIGLU_OAI", "alpha {alpha} and limit {limit} must not be NaN"));
    }
    Ok(())
}
