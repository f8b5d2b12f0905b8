//! Rebuilding a client's graph on the server with the engine's own op
//! builders, checking every tensor before anything reads or writes memory.
//!
//! - An *external* tensor (memory the nodes read) is checked on its own:
//!   a known dtype, rows of whole blocks, strides of whole elements, at most
//!   [`Limits::max_tensor_elements`] elements (a zero dimension counted as
//!   one: [`gantry_engine::Limits::check_shape`]), and every byte its layout
//!   can address inside its buffer. It becomes a view of its buffer at its
//!   offset, so it is wherever the client says without an alignment rule.
//! - A *computed* tensor's shape is bounded the same way, then it is built
//!   again by the builder of its op (`mul_mat`,
//!   `rope`, ...) from the tensors built before it: the builder checks
//!   shapes, strides and dtypes against the op's rules, and the result must
//!   be exactly the tensor the client described (dtype, shape, strides, op
//!   and parameters, sources). A result the builder lays out anew must fit
//!   where the client placed it; one that is a view (in-place ops, CPY,
//!   SET_ROWS, views) must be where its source puts it; a VIEW must lie
//!   inside its buffer (the client's own builder checked it against the
//!   client's root tensor, which the server does not know).
//!
//! So every node that reaches a kernel is one the engine itself would have
//! built, in memory that belongs to the client's buffers.

use gantry_engine::tensor::MAX_DIMS;
use gantry_engine::{
    BufferId, Context, DType, Error, MAX_SRC, Name, Op, Result, TensorDesc, TensorFlags, TensorId, TensorLayout,
};

use crate::wire::{Limits, WireGraph, WireLocation, WireTensor};

/// Whether tensors come with their memory (a compute) or without (asking
/// whether an op is supported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildMode {
    /// Every tensor must say where it is.
    Compute,
    /// No tensor has memory; only descriptions are built.
    Query,
}

/// A graph built into a context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuiltGraph {
    /// The computed tensors, in order.
    pub nodes: Vec<TensorId>,
    /// Every tensor made for the graph (to remove it again).
    pub tensors: Vec<TensorId>,
}

/// Builds `graph` into `ctx`. On an error the caller removes what was built
/// (a [`Context::mark`] before, a rewind after). `resolve` turns a buffer
/// handle into the session's buffer.
pub fn build_graph(
    ctx: &mut Context,
    graph: &WireGraph<'_>,
    resolve: &dyn Fn(u64) -> Result<BufferId>,
    mode: BuildMode,
    limits: &Limits,
) -> Result<BuiltGraph> {
    let n = graph.tensors.len();
    let mut b = Builder {
        ctx,
        resolve,
        mode,
        limits,
        roots: Vec::new(),
        ids: Vec::with_capacity(n),
        created: Vec::with_capacity(n + 4),
    };
    let mut nodes = Vec::new();
    for (i, t) in graph.tensors.iter().enumerate() {
        let id = if t.computed { b.computed(i, t)? } else { b.external(i, t)? };
        if t.computed {
            nodes.push(id);
        }
        b.ids.push(id);
    }
    Ok(BuiltGraph { nodes, tensors: b.created })
}

struct Builder<'a, 'c> {
    ctx: &'c mut Context,
    resolve: &'a dyn Fn(u64) -> Result<BufferId>,
    mode: BuildMode,
    limits: &'a Limits,
    /// One tensor spanning each buffer used, that every tensor placed there views.
    roots: Vec<(BufferId, TensorId)>,
    /// The tensor built for each wire tensor so far.
    ids: Vec<TensorId>,
    /// Every tensor inserted.
    created: Vec<TensorId>,
}

/// How messages name a wire tensor.
fn what(i: usize, t: &WireTensor<'_>) -> String {
    if t.name.is_empty() { format!("tensor {i}") } else { format!("tensor {i} '{}'", t.name) }
}

fn invalid(i: usize, t: &WireTensor<'_>, reason: String) -> Error {
    Error::InvalidTensor { tensor: what(i, t), reason }
}

/// Bytes from the first addressable byte to one past the last; `None` when
/// the computation overflows.
fn extent(dtype: DType, ne: &[usize; MAX_DIMS], nb: &[usize; MAX_DIMS]) -> Option<usize> {
    if ne.contains(&0) {
        return Some(0);
    }
    let bs = dtype.block_size();
    let mut n = (ne[0] / bs).checked_sub(1)?.checked_mul(nb[0])?.checked_add(dtype.bytes_per_block())?;
    for i in 1..MAX_DIMS {
        n = n.checked_add((ne[i] - 1).checked_mul(nb[i])?)?;
    }
    Some(n)
}

/// Checks `t`'s shape against the shared bounds: a zero dimension counts as
/// one, so `[0, 2^60, 1, 1]` is refused instead of taken as empty and then
/// looped over by a kernel that walks its rows.
///
/// And no two of its elements may lie at one byte (a stride of zero, or
/// smaller than the dimensions below span): a view of 16 KiB whose rows all
/// alias would let a product over 2^36 elements run for hours on bytes the
/// client never had to send or pay for in memory. With elements apart, the
/// work of a node is bounded by the memory its sources really hold.
fn check_shape(i: usize, t: &WireTensor<'_>, limits: &Limits) -> Result<()> {
    limits.shapes().check_shape(&t.ne).map_err(|reason| invalid(i, t, reason))?;
    let layout = TensorLayout { dtype: t.dtype, ne: t.ne, nb: t.nb };
    if layout.overlaps_itself() {
        return Err(invalid(i, t, format!("strides {:?} put several elements of shape {:?} at one byte", t.nb, t.ne)));
    }
    Ok(())
}

/// Checks a layout on its own terms and returns its extent in bytes.
fn check_layout(i: usize, t: &WireTensor<'_>, limits: &Limits) -> Result<usize> {
    let (dtype, ne, nb) = (t.dtype, &t.ne, &t.nb);
    let bs = dtype.block_size();
    if !ne[0].is_multiple_of(bs) {
        return Err(invalid(i, t, format!("row length {} is not a multiple of {dtype}'s block size {bs}", ne[0])));
    }
    let size = dtype.bytes_per_block();
    if dtype.is_quantized() {
        if ne[0] > bs && nb[0] != size {
            return Err(invalid(i, t, format!("{dtype} blocks take {size} bytes, not a stride of {}", nb[0])));
        }
    } else if (0..MAX_DIMS).any(|d| ne[d] > 1 && !nb[d].is_multiple_of(size)) {
        return Err(invalid(i, t, format!("strides {nb:?} are not whole {dtype} elements of {size} bytes")));
    }
    check_shape(i, t, limits)?;
    extent(dtype, ne, nb).ok_or_else(|| invalid(i, t, format!("strides {nb:?} of shape {ne:?} overflow")))
}

impl Builder<'_, '_> {
    fn src(&self, i: usize, t: &WireTensor<'_>, k: usize) -> Result<TensorId> {
        self.opt_src(t, k).ok_or_else(|| invalid(i, t, format!("{} needs source {k}", t.op.name())))
    }

    fn opt_src(&self, t: &WireTensor<'_>, k: usize) -> Option<TensorId> {
        // Indices were checked against the tensor's position when decoding.
        t.srcs[k].and_then(|s| self.ids.get(s as usize).copied())
    }

    /// The tensor spanning `buffer`, made on first use.
    fn root(&mut self, buffer: BufferId) -> Result<TensorId> {
        if let Some(&(_, t)) = self.roots.iter().find(|(b, _)| *b == buffer) {
            return Ok(t);
        }
        let size = self.ctx.buffer(buffer)?.buffer.size();
        let desc = TensorDesc::contiguous(DType::I32, [size / 4, 1, 1, 1])
            .map_err(|reason| Error::InvalidTensor { tensor: "buffer root".into(), reason })?;
        let t = self.ctx.insert(desc);
        self.created.push(t);
        self.ctx.place(t, buffer, 0)?;
        self.roots.push((buffer, t));
        Ok(t)
    }

    /// The buffer, offset and buffer size of a location whose `len` bytes
    /// must lie inside the buffer, at an offset of whole elements.
    fn locate(&self, i: usize, t: &WireTensor<'_>, loc: WireLocation, len: usize) -> Result<(BufferId, usize)> {
        let buffer = (self.resolve)(loc.buffer).map_err(|e| invalid(i, t, e.to_string()))?;
        let size = self.ctx.buffer(buffer)?.buffer.size();
        let offset = usize::try_from(loc.offset).map_err(|_| invalid(i, t, format!("offset {}", loc.offset)))?;
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(invalid(
                i,
                t,
                format!("{len} bytes at offset {offset} do not fit in buffer {} of {size} bytes", loc.buffer),
            ));
        }
        let elem = if t.dtype.is_quantized() { 1 } else { t.dtype.bytes_per_block() };
        if !offset.is_multiple_of(elem) {
            return Err(invalid(i, t, format!("offset {offset} is not a whole number of {} elements", t.dtype)));
        }
        Ok((buffer, offset))
    }

    /// A tensor with `t`'s layout and no op, at `t`'s location when
    /// computing (checked against its buffer) or nowhere when asking.
    fn layout_tensor(&mut self, i: usize, t: &WireTensor<'_>) -> Result<TensorId> {
        let len = check_layout(i, t, self.limits)?;
        let mut desc = TensorDesc {
            dtype: t.dtype,
            ne: t.ne,
            nb: t.nb,
            op: Op::None,
            srcs: [None; MAX_SRC],
            view_src: None,
            view_offset: 0,
            flags: TensorFlags::NONE,
            name: Name::new(t.name),
        };
        if self.mode == BuildMode::Compute {
            let loc = t.location.ok_or_else(|| invalid(i, t, "has no location".into()))?;
            let (buffer, offset) = self.locate(i, t, loc, len)?;
            desc.view_src = Some(self.root(buffer)?);
            desc.view_offset = offset;
        }
        let t = self.ctx.insert(desc);
        self.created.push(t);
        Ok(t)
    }

    fn external(&mut self, i: usize, t: &WireTensor<'_>) -> Result<TensorId> {
        if t.op != Op::None || t.srcs.iter().any(Option::is_some) {
            return Err(invalid(i, t, "an external tensor has no op and no sources".into()));
        }
        self.layout_tensor(i, t)
    }

    fn computed(&mut self, i: usize, t: &WireTensor<'_>) -> Result<TensorId> {
        // Before the builder runs: the result must be `t`'s shape, and an op
        // over huge sources (a broadcast, a product) is refused by its size.
        check_shape(i, t, self.limits)?;
        let built = self.replay(i, t)?;
        self.created.push(built);
        let d = *self.ctx.desc(built)?;
        if d.dtype != t.dtype || d.ne != t.ne || d.nb != t.nb || d.op != t.op {
            return Err(invalid(
                i,
                t,
                format!(
                    "described as {} {} {:?} with strides {:?}, but {} of its sources gives {} {:?} with strides \
                     {:?}{}",
                    t.op.name(),
                    t.dtype,
                    t.ne,
                    t.nb,
                    d.op.name(),
                    d.dtype,
                    d.ne,
                    d.nb,
                    // Parameters that differ where nothing else does (a NaN is not equal to itself).
                    if d.op == t.op { String::new() } else { format!(" (parameters {:?} against {:?})", t.op, d.op) }
                ),
            ));
        }
        let wire_srcs: [Option<TensorId>; MAX_SRC] = std::array::from_fn(|k| self.opt_src(t, k));
        if d.srcs != wire_srcs {
            return Err(invalid(i, t, format!("{} does not take the sources given", t.op.name())));
        }
        if self.mode == BuildMode::Compute {
            let loc = t.location.ok_or_else(|| invalid(i, t, "has no location".into()))?;
            match d.view_src {
                Some(_) => {
                    // A view: its memory follows from its source's; the client must agree.
                    let p =
                        self.ctx.placement(built).ok_or_else(|| invalid(i, t, "its source has no memory".into()))?;
                    let buffer = (self.resolve)(loc.buffer).map_err(|e| invalid(i, t, e.to_string()))?;
                    if p.buffer != buffer || p.offset as u64 != loc.offset {
                        return Err(invalid(
                            i,
                            t,
                            format!(
                                "{} views its source at offset {}, not at offset {} of buffer {}",
                                t.op.name(),
                                p.offset,
                                loc.offset,
                                loc.buffer
                            ),
                        ));
                    }
                }
                None => {
                    let (buffer, offset) = self.locate(i, t, loc, d.nbytes())?;
                    let root = self.root(buffer)?;
                    let desc = self.ctx.desc_mut(built)?;
                    desc.view_src = Some(root);
                    desc.view_offset = offset;
                }
            }
        }
        self.ctx.desc_mut(built)?.name = Name::new(t.name);
        Ok(built)
    }

    /// Where `t`'s first byte is relative to its first source's, for VIEW.
    fn view_offset(&self, i: usize, t: &WireTensor<'_>, base: TensorId) -> Result<usize> {
        if self.mode == BuildMode::Query {
            return Ok(0);
        }
        let loc = t.location.ok_or_else(|| invalid(i, t, "has no location".into()))?;
        let buffer = (self.resolve)(loc.buffer).map_err(|e| invalid(i, t, e.to_string()))?;
        let p = self.ctx.placement(base).ok_or_else(|| invalid(i, t, "its source has no memory".into()))?;
        (p.buffer == buffer)
            .then(|| usize::try_from(loc.offset).ok()?.checked_sub(p.offset))
            .flatten()
            .ok_or_else(|| invalid(i, t, format!("a view at offset {} lies outside its source", loc.offset)))
    }

    /// The tensor `t`'s op builds from its sources.
    fn replay(&mut self, i: usize, t: &WireTensor<'_>) -> Result<TensorId> {
        let a = |b: &Self| b.src(i, t, 0);
        let b1 = |b: &Self| b.src(i, t, 1);
        let inplace = t.view;
        // Ops that are views by nature ignore the flag; the others must have an in-place builder.
        let view_or_inplace = matches!(
            t.op,
            Op::View
                | Op::Reshape
                | Op::Permute { .. }
                | Op::Transpose
                | Op::Cpy
                | Op::SetRows
                | Op::Binary(_)
                | Op::Scale { .. }
                | Op::LeakyRelu { .. }
                | Op::Unary(_)
                | Op::RmsNorm { .. }
                | Op::SoftMax { .. }
                | Op::DiagMaskInf { .. }
                | Op::Rope(_)
        );
        if inplace && !view_or_inplace {
            return Err(invalid(i, t, format!("{} has no in-place form", t.op.name())));
        }
        let ctx_op = |r: Result<TensorId>| r.map_err(|e| invalid(i, t, e.to_string()));
        let built = match t.op {
            Op::None => return Err(invalid(i, t, "a computed tensor needs an op".into())),
            Op::View => {
                let src = a(self)?;
                let offset = self.view_offset(i, t, src)?;
                self.ctx.view(src, t.ne, t.nb, offset)
            }
            Op::Reshape => {
                let src = a(self)?;
                self.ctx.reshape(src, t.ne)
            }
            Op::Permute { axes } => {
                let src = a(self)?;
                self.ctx.permute(src, axes.map(usize::from))
            }
            Op::Transpose => {
                let src = a(self)?;
                self.ctx.transpose(src)
            }
            Op::Cpy => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.cpy(x, y)
            }
            Op::Cont => {
                let src = a(self)?;
                self.ctx.cont_shape(src, t.ne)
            }
            Op::Dup => {
                let src = a(self)?;
                self.ctx.dup(src)
            }
            Op::GetRows => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.get_rows(x, y)
            }
            Op::SetRows => {
                // The rows are written into a tensor that is not a source: the
                // one with the result's own layout, where the result is.
                let (rows, idx) = (a(self)?, b1(self)?);
                let base = self.layout_tensor(i, t)?;
                self.ctx.set_rows(base, rows, idx)
            }
            Op::Binary(op) => {
                let (x, y) = (a(self)?, b1(self)?);
                if inplace { self.ctx.binary_inplace(op, x, y) } else { self.ctx.binary(op, x, y) }
            }
            Op::Scale { scale, bias } => {
                let x = a(self)?;
                if inplace { self.ctx.scale_inplace(x, scale, bias) } else { self.ctx.scale(x, scale, bias) }
            }
            Op::Clamp { min, max } => {
                let x = a(self)?;
                self.ctx.clamp(x, min, max)
            }
            Op::LeakyRelu { negative_slope } => {
                let x = a(self)?;
                if inplace {
                    self.ctx.leaky_relu_inplace(x, negative_slope)
                } else {
                    self.ctx.leaky_relu(x, negative_slope)
                }
            }
            Op::Unary(op) => {
                let x = a(self)?;
                if inplace { self.ctx.unary_inplace(op, x) } else { self.ctx.unary(op, x) }
            }
            Op::Glu { op, swapped } => {
                let x = a(self)?;
                match self.opt_src(t, 1) {
                    Some(g) if !swapped => self.ctx.glu_split(op, x, g),
                    Some(_) => return Err(invalid(i, t, "the split GLU form has no swapped variant".into())),
                    None => self.ctx.glu(op, x, swapped),
                }
            }
            Op::Sum => {
                let x = a(self)?;
                self.ctx.sum(x)
            }
            Op::SumRows => {
                let x = a(self)?;
                self.ctx.sum_rows(x)
            }
            Op::Mean => {
                let x = a(self)?;
                self.ctx.mean(x)
            }
            Op::Argmax => {
                let x = a(self)?;
                self.ctx.argmax(x)
            }
            Op::Norm { eps } => {
                let x = a(self)?;
                self.ctx.norm(x, eps)
            }
            Op::RmsNorm { eps } => {
                let x = a(self)?;
                if inplace { self.ctx.rms_norm_inplace(x, eps) } else { self.ctx.rms_norm(x, eps) }
            }
            Op::SoftMax { scale, max_bias } => {
                let (x, mask) = (a(self)?, self.opt_src(t, 1));
                if let Some(sinks) = self.opt_src(t, 2) {
                    if inplace {
                        return Err(invalid(i, t, "SOFT_MAX with sinks has no in-place form".into()));
                    }
                    self.ctx.soft_max_ext_sinks(x, mask, sinks, scale, max_bias)
                } else if inplace {
                    self.ctx.soft_max_ext_inplace(x, mask, scale, max_bias)
                } else {
                    self.ctx.soft_max_ext(x, mask, scale, max_bias)
                }
            }
            Op::DiagMaskInf { n_past } => {
                let x = a(self)?;
                if inplace { self.ctx.diag_mask_inf_inplace(x, n_past) } else { self.ctx.diag_mask_inf(x, n_past) }
            }
            Op::Rope(p) => {
                let (x, pos, factors) = (a(self)?, b1(self)?, self.opt_src(t, 2));
                if inplace { self.ctx.rope_inplace(x, pos, factors, p) } else { self.ctx.rope(x, pos, factors, p) }
            }
            Op::MulMat => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.mul_mat(x, y)
            }
            Op::Concat { dim } => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.concat(x, y, usize::from(dim))
            }
            Op::Repeat => {
                let x = a(self)?;
                self.ctx.repeat_to(x, t.ne)
            }
            Op::MulMatId => {
                let (w, x, ids) = (a(self)?, b1(self)?, self.src(i, t, 2)?);
                self.ctx.mul_mat_id(w, x, ids)
            }
            Op::AddId => {
                let (x, bias, ids) = (a(self)?, b1(self)?, self.src(i, t, 2)?);
                self.ctx.add_id(x, bias, ids)
            }
            Op::Argsort { order } => {
                let x = a(self)?;
                self.ctx.argsort(x, order)
            }
            Op::TopK => {
                let x = a(self)?;
                self.ctx.top_k(x, t.ne[0])
            }
            Op::Cumsum => {
                let x = a(self)?;
                self.ctx.cumsum(x)
            }
            Op::SwigluOai { alpha, limit, swapped } => {
                let x = a(self)?;
                match self.opt_src(t, 1) {
                    Some(g) if !swapped => self.ctx.swiglu_oai_split(x, g, alpha, limit),
                    Some(_) => return Err(invalid(i, t, "the split SWIGLU_OAI form has no swapped variant".into())),
                    None => self.ctx.swiglu_oai(x, alpha, limit, swapped),
                }
            }
            Op::Im2col { conv, is_2d } => {
                let (k, x) = (a(self)?, b1(self)?);
                self.ctx.im2col(k, x, conv, is_2d, t.dtype)
            }
            Op::Conv2d(conv) => {
                let (k, x) = (a(self)?, b1(self)?);
                self.ctx.conv_2d_direct(k, x, conv)
            }
            Op::Conv2dDw(conv) => {
                let (k, x) = (a(self)?, b1(self)?);
                self.ctx.conv_2d_dw_direct(k, x, conv)
            }
            Op::ConvTranspose1d { stride } => {
                let (k, x) = (a(self)?, b1(self)?);
                self.ctx.conv_transpose_1d(k, x, stride)
            }
            Op::ConvTranspose2d { stride } => {
                let (k, x) = (a(self)?, b1(self)?);
                self.ctx.conv_transpose_2d(k, x, stride)
            }
            Op::Pool1d { op, k, s, p } => {
                let x = a(self)?;
                self.ctx.pool_1d(x, op, k, s, p)
            }
            Op::Pool2d { op, k, s, p } => {
                let x = a(self)?;
                self.ctx.pool_2d(x, op, k, s, p)
            }
            Op::Upscale { mode, align_corners } => {
                let x = a(self)?;
                self.ctx.upscale_ext(x, t.ne, mode, align_corners)
            }
            Op::Pad { lp, rp, circular } => {
                let x = a(self)?;
                if circular { self.ctx.pad_ext_circular(x, lp, rp) } else { self.ctx.pad_ext(x, lp, rp) }
            }
            Op::PadReflect1d { p0, p1 } => {
                let x = a(self)?;
                self.ctx.pad_reflect_1d(x, p0, p1)
            }
            Op::Roll { shift } => {
                let x = a(self)?;
                self.ctx.roll(x, shift)
            }
            Op::GroupNorm { n_groups, eps } => {
                let x = a(self)?;
                self.ctx.group_norm(x, n_groups, eps)
            }
            Op::L2Norm { eps } => {
                let x = a(self)?;
                self.ctx.l2_norm(x, eps)
            }
            Op::Arange { start, stop, step } => self.ctx.arange(start, stop, step),
            Op::TimestepEmbedding { dim, max_period } => {
                let x = a(self)?;
                self.ctx.timestep_embedding(x, dim, max_period)
            }
            Op::Xielu { alpha_n, alpha_p, beta, eps } => {
                let x = a(self)?;
                self.ctx.xielu_stored(x, alpha_n, alpha_p, beta, eps)
            }
            Op::Fill { c } => {
                let x = a(self)?;
                self.ctx.fill(x, c)
            }
            Op::Tri(kind) => {
                let x = a(self)?;
                self.ctx.tri(x, kind)
            }
            Op::Diag => {
                let x = a(self)?;
                self.ctx.diag(x)
            }
            Op::DiagMaskZero { n_past } => {
                let x = a(self)?;
                self.ctx.diag_mask_zero(x, n_past)
            }
            Op::Set { nb, offset } => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.set(x, y, nb, offset)
            }
            Op::Acc { nb, offset } => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.acc(x, y, nb, offset)
            }
            Op::Add1 => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.add1(x, y)
            }
            Op::CountEqual => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.count_equal(x, y)
            }
            Op::SsmConv => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.ssm_conv(x, y)
            }
            Op::SolveTri => {
                let (x, y) = (a(self)?, b1(self)?);
                self.ctx.solve_tri(x, y, true, true, false)
            }
            Op::RwkvWkv6 => {
                let [k, v, r, tf, td, s] = [0, 1, 2, 3, 4, 5].map(|k| self.src(i, t, k));
                self.ctx.rwkv_wkv6(k?, v?, r?, tf?, td?, s?)
            }
            Op::GatedLinearAttn { scale } => {
                let [k, v, q, g, s] = [0, 1, 2, 3, 4].map(|k| self.src(i, t, k));
                self.ctx.gated_linear_attn(k?, v?, q?, g?, s?, scale)
            }
            Op::RwkvWkv7 => {
                let [r, w, k, v, a_, b, s] = [0, 1, 2, 3, 4, 5, 6].map(|k| self.src(i, t, k));
                self.ctx.rwkv_wkv7(r?, w?, k?, v?, a_?, b?, s?)
            }
            Op::GatedDeltaNet { states } => {
                let [q, k, v, g, beta, s] = [0, 1, 2, 3, 4, 5].map(|k| self.src(i, t, k));
                self.ctx.gated_delta_net(q?, k?, v?, g?, beta?, s?, states)
            }
            // The window counts follow from the image and the side; the
            // result is then compared with the client's, counts included.
            Op::WinPart { w, .. } => {
                let x = a(self)?;
                self.ctx.win_part(x, w as usize)
            }
            Op::WinUnpart { w } => {
                let x = a(self)?;
                self.ctx.win_unpart(x, t.ne[1], t.ne[2], w as usize)
            }
            Op::GetRelPos => {
                let x = a(self)?;
                self.ctx.get_rel_pos(x, t.ne[2], t.ne[1])
            }
            Op::AddRelPos => {
                let (x, pw, ph) = (a(self)?, b1(self)?, self.src(i, t, 2)?);
                self.ctx.add_rel_pos(x, pw, ph)
            }
            Op::SsmScan { states } => {
                let [s, x, dt, a_, b, c, ids] = [0, 1, 2, 3, 4, 5, 6].map(|k| self.src(i, t, k));
                self.ctx.ssm_scan(s?, x?, dt?, a_?, b?, c?, ids?, states)
            }
            Op::FlashAttnExt { scale, max_bias, softcap } => {
                let (q, k, v) = (a(self)?, b1(self)?, self.src(i, t, 2)?);
                let mask = self.opt_src(t, 3);
                match self.opt_src(t, 4) {
                    Some(sinks) => self.ctx.flash_attn_ext_sinks(q, k, v, mask, sinks, scale, max_bias, softcap),
                    None => self.ctx.flash_attn_ext(q, k, v, mask, scale, max_bias, softcap),
                }
            }
        };
        ctx_op(built)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_cpu as cpu;
    use gantry_engine::BufferUsage;

    fn tensor<'a>(dtype: DType, ne: [usize; 4], op: Op, srcs: &[u32], loc: Option<(u64, u64)>) -> WireTensor<'a> {
        let nb = gantry_engine::tensor::contiguous_strides(dtype, ne).unwrap();
        let mut s = [None; MAX_SRC];
        for (k, &v) in srcs.iter().enumerate() {
            s[k] = Some(v);
        }
        WireTensor {
            computed: op != Op::None,
            view: false,
            dtype,
            ne,
            nb,
            op,
            srcs: s,
            location: loc.map(|(buffer, offset)| WireLocation { buffer, offset }),
            name: "",
        }
    }

    /// A context with one 4 KiB CPU buffer, handle 7.
    fn session() -> (Context, BufferId) {
        let mut ctx = Context::new();
        let b = ctx.alloc_buffer(&cpu::buffer_type(), 4096, BufferUsage::Any).unwrap();
        (ctx, b)
    }

    fn build(ctx: &mut Context, b: BufferId, tensors: Vec<WireTensor<'_>>) -> Result<Vec<TensorId>> {
        let resolve = move |h: u64| {
            if h == 7 { Ok(b) } else { Err(Error::StaleHandle { kind: "buffer", handle: h.to_string() }) }
        };
        build_graph(ctx, &WireGraph { tensors }, &resolve, BuildMode::Compute, &Limits::default()).map(|g| g.nodes)
    }

    #[test]
    fn a_valid_product_builds_and_computes_in_place() {
        let (mut ctx, b) = session();
        let graph = vec![
            tensor(DType::F32, [4, 3, 1, 1], Op::None, &[], Some((7, 0))),
            tensor(DType::F32, [4, 2, 1, 1], Op::None, &[], Some((7, 64))),
            tensor(DType::F32, [3, 2, 1, 1], Op::MulMat, &[0, 1], Some((7, 128))),
        ];
        let nodes = build(&mut ctx, b, graph).unwrap();
        assert_eq!(nodes.len(), 1);
        let p = ctx.placement(nodes[0]).unwrap();
        assert_eq!((p.buffer, p.offset), (b, 128));
    }

    #[test]
    fn claims_the_op_rules_contradict_are_refused() {
        let (mut ctx, b) = session();
        // The product of [4, 3] and [4, 2] is [3, 2], not [3, 3].
        let graph = vec![
            tensor(DType::F32, [4, 3, 1, 1], Op::None, &[], Some((7, 0))),
            tensor(DType::F32, [4, 2, 1, 1], Op::None, &[], Some((7, 64))),
            tensor(DType::F32, [3, 3, 1, 1], Op::MulMat, &[0, 1], Some((7, 128))),
        ];
        let err = build(&mut ctx, b, graph).unwrap_err().to_string();
        assert!(err.contains("MUL_MAT") && err.contains("[3, 2, 1, 1]"), "{err}");

        // Inner dimensions that differ: the builder refuses them.
        let graph = vec![
            tensor(DType::F32, [4, 3, 1, 1], Op::None, &[], Some((7, 0))),
            tensor(DType::F32, [5, 2, 1, 1], Op::None, &[], Some((7, 64))),
            tensor(DType::F32, [3, 2, 1, 1], Op::MulMat, &[0, 1], Some((7, 128))),
        ];
        assert!(build(&mut ctx, b, graph).unwrap_err().to_string().contains("cannot multiply"));

        // An extra source the op does not take.
        let graph = vec![
            tensor(DType::F32, [4, 1, 1, 1], Op::None, &[], Some((7, 0))),
            tensor(DType::F32, [4, 1, 1, 1], Op::Unary(gantry_engine::UnaryOp::Silu), &[0, 0], Some((7, 64))),
        ];
        assert!(build(&mut ctx, b, graph).unwrap_err().to_string().contains("does not take the sources"));
    }

    #[test]
    fn vision_ops_are_rebuilt_by_their_builders() {
        use gantry_engine::{ConvParams, PoolOp, ScaleMode};
        let (mut ctx, b) = session();
        let conv = ConvParams::square(1, 1, 1);
        let graph = vec![
            tensor(DType::F32, [3, 3, 2, 2], Op::None, &[], Some((7, 0))),
            tensor(DType::F32, [4, 4, 2, 1], Op::None, &[], Some((7, 256))),
            tensor(DType::F16, [18, 4, 4, 1], Op::Im2col { conv, is_2d: true }, &[0, 1], Some((7, 512))),
            tensor(DType::F32, [4, 4, 2, 1], Op::Conv2d(conv), &[0, 1], Some((7, 1152))),
            tensor(
                DType::F32,
                [2, 2, 2, 1],
                Op::Pool2d { op: PoolOp::Max, k: [2, 2], s: [2, 2], p: [0, 0] },
                &[3],
                Some((7, 1280)),
            ),
            tensor(
                DType::F32,
                [8, 8, 2, 1],
                Op::Upscale { mode: ScaleMode::Bilinear, align_corners: true },
                &[3],
                Some((7, 1344)),
            ),
            tensor(
                DType::F32,
                [5, 5, 2, 1],
                Op::Pad { lp: [1, 0, 0, 0], rp: [0, 1, 0, 0], circular: false },
                &[3],
                Some((7, 1856)),
            ),
            tensor(DType::F32, [4, 4, 2, 1], Op::GroupNorm { n_groups: 2, eps: 1e-6 }, &[3], Some((7, 2064))),
            tensor(DType::F32, [7, 1, 1, 1], Op::Arange { start: 0.0, stop: 7.0, step: 1.0 }, &[], Some((7, 2192))),
            tensor(
                DType::F32,
                [6, 7, 1, 1],
                Op::TimestepEmbedding { dim: 6, max_period: 10000 },
                &[8],
                Some((7, 2224)),
            ),
        ];
        assert_eq!(build(&mut ctx, b, graph.clone()).unwrap().len(), 8);
        // Claims the op rules contradict: a shape, a kernel that does not fit, a bad parameter.
        let mut wrong = graph.clone();
        wrong[4].ne = [3, 2, 2, 1];
        wrong[4].nb = gantry_engine::tensor::contiguous_strides(DType::F32, wrong[4].ne).unwrap();
        let err = build(&mut ctx, b, wrong).unwrap_err().to_string();
        assert!(err.contains("POOL_2D") && err.contains("[2, 2, 2, 1]"), "{err}");
        let mut wrong = graph.clone();
        wrong[3].op = Op::Conv2d(ConvParams { stride: [0, 1], ..conv });
        assert!(build(&mut ctx, b, wrong).unwrap_err().to_string().contains("stride"));
        let mut wrong = graph[..8].to_vec();
        wrong[7].op = Op::GroupNorm { n_groups: 0, eps: 1e-6 };
        assert!(build(&mut ctx, b, wrong).unwrap_err().to_string().contains("GROUP_NORM"));
        let mut wrong = graph;
        wrong[8].op = Op::Arange { start: 0.0, stop: 7.0, step: -1.0 };
        assert!(build(&mut ctx, b, wrong).unwrap_err().to_string().contains("ARANGE"));
        // SET's view must lie inside its destination.
        let set = |offset| {
            vec![
                tensor(DType::F32, [4, 4, 1, 1], Op::None, &[], Some((7, 0))),
                tensor(DType::F32, [2, 2, 1, 1], Op::None, &[], Some((7, 64))),
                tensor(DType::F32, [4, 4, 1, 1], Op::Set { nb: [16, 32, 32], offset }, &[0, 1], Some((7, 128))),
            ]
        };
        assert!(build(&mut ctx, b, set(8)).is_ok());
        assert!(build(&mut ctx, b, set(48)).unwrap_err().to_string().contains("SET"));
    }

    #[test]
    fn memory_outside_the_buffer_is_refused() {
        let (mut ctx, b) = session();
        for (ne, nb, offset) in [
            ([1024, 2, 1, 1], [4, 4096, 8192, 8192], 0u64), // the second row is past the end
            ([16, 1, 1, 1], [4, 64, 64, 64], 4090),         // starts inside, ends outside
            ([4, 1, 1, 1], [4, 16, 16, 16], u64::MAX - 2),  // offset overflows
            ([4, 1 << 40, 1, 1], [4, 1 << 40, 1, 1], 0),    // strides overflow
        ] {
            let mut t = tensor(DType::F32, [1, 1, 1, 1], Op::None, &[], Some((7, offset)));
            t.ne = ne;
            t.nb = nb;
            let err = build(&mut ctx, b, vec![t]).unwrap_err().to_string();
            assert!(err.contains("do not fit") || err.contains("overflow") || err.contains("elements"), "{err}");
        }
        // A node whose result would end past the buffer.
        let graph = vec![
            tensor(DType::F32, [4, 1, 1, 1], Op::None, &[], Some((7, 0))),
            tensor(DType::F32, [4, 1, 1, 1], Op::Unary(gantry_engine::UnaryOp::Neg), &[0], Some((7, 4088))),
        ];
        assert!(build(&mut ctx, b, graph).unwrap_err().to_string().contains("do not fit"));
        // An unknown buffer, a missing location, misaligned elements.
        let t = tensor(DType::F32, [4, 1, 1, 1], Op::None, &[], Some((8, 0)));
        assert!(build(&mut ctx, b, vec![t]).unwrap_err().to_string().contains("stale"));
        let t = tensor(DType::F32, [4, 1, 1, 1], Op::None, &[], None);
        assert!(build(&mut ctx, b, vec![t]).unwrap_err().to_string().contains("no location"));
        let t = tensor(DType::F32, [4, 1, 1, 1], Op::None, &[], Some((7, 2)));
        assert!(build(&mut ctx, b, vec![t]).unwrap_err().to_string().contains("whole number"));
    }

    #[test]
    fn a_zero_dimension_does_not_hide_a_huge_one() {
        let (mut ctx, b) = session();
        // Empty by its element count, but a kernel walking its rows would loop 2^60 times.
        let mut empty = tensor(DType::F32, [1, 1, 1, 1], Op::None, &[], Some((7, 0)));
        empty.ne = [0, 1 << 60, 1, 1];
        empty.nb = [4, 0, 0, 0];
        let err = build(&mut ctx, b, vec![empty]).unwrap_err().to_string();
        assert!(err.contains("tensor 0") && err.contains("spans more than"), "{err}");
        // A computed tensor's shape is bounded before its op's builder runs.
        let one = tensor(DType::F32, [1, 1, 1, 1], Op::None, &[], Some((7, 0)));
        let mut repeat = tensor(DType::F32, [1, 1, 1, 1], Op::Repeat, &[0], Some((7, 64)));
        repeat.ne = [0, 1 << 60, 1, 1];
        repeat.nb = [4, 0, 0, 0];
        let err = build(&mut ctx, b, vec![one, repeat]).unwrap_err().to_string();
        assert!(err.contains("tensor 1") && err.contains("spans more than"), "{err}");
        // Within the bound, an empty tensor is still fine.
        let mut small = tensor(DType::F32, [1, 1, 1, 1], Op::None, &[], Some((7, 0)));
        small.ne = [0, 16, 1, 1];
        assert!(build(&mut ctx, b, vec![small]).is_ok());
    }

    #[test]
    fn elements_at_one_byte_are_refused() {
        let (mut ctx, b) = session();
        // 2^24 rows of 4096 floats, every row at the same 16 KiB: a product
        // over it would run for long on bytes the client never held.
        let mut aliased = tensor(DType::F32, [1, 1, 1, 1], Op::None, &[], Some((7, 0)));
        aliased.ne = [1024, 1 << 24, 1, 1];
        aliased.nb = [4, 0, 0, 0];
        let err = build(&mut ctx, b, vec![aliased]).unwrap_err().to_string();
        assert!(err.contains("tensor 0") && err.contains("at one byte"), "{err}");
        // Rows overlapping by half, and a zero stride along a row.
        let mut half = tensor(DType::F32, [1, 1, 1, 1], Op::None, &[], Some((7, 0)));
        half.ne = [8, 4, 1, 1];
        half.nb = [4, 16, 64, 64];
        assert!(build(&mut ctx, b, vec![half]).unwrap_err().to_string().contains("at one byte"));
        let mut flat = tensor(DType::F32, [1, 1, 1, 1], Op::None, &[], Some((7, 0)));
        flat.ne = [64, 1, 1, 1];
        flat.nb = [0, 0, 0, 0];
        assert!(build(&mut ctx, b, vec![flat]).unwrap_err().to_string().contains("at one byte"));
        // A transposed layout puts each element at its own bytes: fine.
        let mut transposed = tensor(DType::F32, [1, 1, 1, 1], Op::None, &[], Some((7, 0)));
        transposed.ne = [4, 8, 1, 1];
        transposed.nb = [32, 4, 128, 128];
        assert!(build(&mut ctx, b, vec![transposed]).is_ok());
    }

    #[test]
    fn views_must_be_where_their_source_puts_them() {
        let (mut ctx, b) = session();
        let base = tensor(DType::F32, [8, 2, 1, 1], Op::None, &[], Some((7, 256)));
        // A reshape claimed elsewhere than its source.
        let mut reshape = tensor(DType::F32, [16, 1, 1, 1], Op::Reshape, &[0], Some((7, 0)));
        reshape.view = true;
        let err = build(&mut ctx, b, vec![base.clone(), reshape.clone()]).unwrap_err().to_string();
        assert!(err.contains("views its source at offset 256"), "{err}");
        reshape.location = Some(WireLocation { buffer: 7, offset: 256 });
        let nodes = build(&mut ctx, b, vec![base.clone(), reshape]).unwrap();
        assert_eq!(ctx.placement(nodes[0]).unwrap().offset, 256);
        // A view's offset is where the client put it, inside the source.
        let mut view = tensor(DType::F32, [4, 1, 1, 1], Op::View, &[0], Some((7, 256 + 32)));
        view.view = true;
        let nodes = build(&mut ctx, b, vec![base.clone(), view.clone()]).unwrap();
        assert_eq!(ctx.placement(nodes[0]).unwrap().offset, 288);
        // Views are bounded by their buffer (the server does not know the client's root tensor).
        view.location = Some(WireLocation { buffer: 7, offset: 4096 - 8 });
        assert!(build(&mut ctx, b, vec![base.clone(), view.clone()]).unwrap_err().to_string().contains("VIEW"));
        view.location = Some(WireLocation { buffer: 7, offset: 128 }); // before its source
        assert!(build(&mut ctx, b, vec![base, view]).unwrap_err().to_string().contains("outside its source"));
    }

    #[test]
    fn externals_carry_no_op_and_computed_tensors_need_one() {
        let (mut ctx, b) = session();
        let mut t = tensor(DType::F32, [4, 1, 1, 1], Op::MulMat, &[], Some((7, 0)));
        t.computed = false;
        assert!(build(&mut ctx, b, vec![t]).unwrap_err().to_string().contains("no op"));
        let mut t = tensor(DType::F32, [4, 1, 1, 1], Op::None, &[], Some((7, 0)));
        t.computed = true;
        assert!(build(&mut ctx, b, vec![t]).unwrap_err().to_string().contains("needs an op"));
        let t = tensor(DType::F32, [4, 1, 1, 1], Op::Unary(gantry_engine::UnaryOp::Neg), &[], Some((7, 0)));
        assert!(build(&mut ctx, b, vec![t]).unwrap_err().to_string().contains("needs source 0"));
    }
}
