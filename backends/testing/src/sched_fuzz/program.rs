//! Building a case's program into a context: the same tensors, in the same
//! order, for the reference and for the scheduled run.

use gantry_engine::{BinaryOp, Context, DType, Result, RopeMode, RopeParams, TensorId, UnaryOp};

use super::case::{DST_ROWS, Instr, SchedCase, WeightShape};

/// The tensors of one built program.
#[derive(Debug, Clone, Default)]
pub struct Program {
    /// Activation inputs (`[k, n]` F32, flagged INPUT).
    pub inputs: Vec<TensorId>,
    /// The I32 index input (`[n]`, flagged INPUT): GET_ROWS and SET_ROWS rows, ROPE positions.
    pub index: Option<TensorId>,
    /// Weights, as the case lists them.
    pub weights: Vec<TensorId>,
    /// Pre-allocated destinations, as the case lists them.
    pub dsts: Vec<TensorId>,
    /// Every `[k, n]` F32 value an instruction can read, in order (inputs first).
    pub values: Vec<TensorId>,
    /// The graph's outputs (flagged OUTPUT).
    pub outputs: Vec<TensorId>,
}

fn pick<T: Copy>(list: &[T], i: u8) -> Option<T> {
    (!list.is_empty()).then(|| list[i as usize % list.len()])
}

/// Creates the case's inputs, weights and destinations (unallocated) and
/// its program's nodes in `ctx`. An instruction whose operands do not exist
/// is skipped; an op builder refusing its operands is an `Err` (a bug in the
/// generator, since every operand is a `[k, n]` F32 value).
pub fn build_program(ctx: &mut Context, case: &SchedCase) -> Result<Program> {
    let (k, n) = (case.k, case.n);
    let mut p = Program::default();
    for i in 0..case.n_inputs {
        let x = ctx.tensor(DType::F32, [k, n])?;
        ctx.set_input(x)?;
        ctx.set_name(x, &format!("x{i}"))?;
        p.inputs.push(x);
        p.values.push(x);
    }
    let index = ctx.tensor(DType::I32, [n])?;
    ctx.set_input(index)?;
    ctx.set_name(index, "index")?;
    p.index = Some(index);
    for (i, w) in case.weights.iter().enumerate() {
        let dtype = if w.f16 { DType::F16 } else { DType::F32 };
        let t = match w.shape {
            WeightShape::Square => ctx.tensor(dtype, [k, k])?,
            WeightShape::Row => ctx.tensor(DType::F32, [k])?,
            WeightShape::Table => ctx.tensor(dtype, [k, DST_ROWS])?,
        };
        ctx.set_name(t, &format!("w{i}"))?;
        p.weights.push(t);
    }
    for (i, d) in case.dsts.iter().enumerate() {
        let t = ctx.tensor(if d.f16 { DType::F16 } else { DType::F32 }, [k, DST_ROWS])?;
        ctx.set_name(t, &format!("dst{i}"))?;
        p.dsts.push(t);
    }
    let weights_of = |shape: WeightShape| -> Vec<TensorId> {
        case.weights.iter().zip(&p.weights).filter(|(w, _)| w.shape == shape).map(|(_, &t)| t).collect()
    };
    let (square, row, table) =
        (weights_of(WeightShape::Square), weights_of(WeightShape::Row), weights_of(WeightShape::Table));
    let row_bytes = k * 4;
    for instr in &case.program {
        let v = |i: u8| pick(&p.values, i);
        let made = match *instr {
            Instr::Binary { op, a, b, inplace } => match (v(a), v(b)) {
                (Some(a), Some(b)) => Some(binary(ctx, op, a, b, inplace)?),
                _ => None,
            },
            Instr::BinaryRow { op, a, w, inplace } => match (v(a), pick(&row, w)) {
                (Some(a), Some(w)) => Some(binary(ctx, op, a, w, inplace)?),
                _ => None,
            },
            Instr::Unary { op, a, inplace } => match v(a) {
                Some(a) => {
                    let op =
                        [UnaryOp::Silu, UnaryOp::Gelu, UnaryOp::Neg, UnaryOp::Tanh, UnaryOp::Relu][op as usize % 5];
                    Some(if inplace { ctx.unary_inplace(op, a)? } else { ctx.unary(op, a)? })
                }
                None => None,
            },
            Instr::Scale { a, s, inplace } => match v(a) {
                Some(a) => {
                    let (scale, bias) = [(0.5, 0.0), (-1.25, 0.125), (2.0, -0.5), (0.0, 1.0)][s as usize % 4];
                    Some(if inplace { ctx.scale_inplace(a, scale, bias)? } else { ctx.scale(a, scale, bias)? })
                }
                None => None,
            },
            Instr::Norm { rms, a, inplace } => match v(a) {
                Some(a) if rms && inplace => Some(ctx.rms_norm_inplace(a, 1e-5)?),
                Some(a) if rms => Some(ctx.rms_norm(a, 1e-5)?),
                Some(a) => Some(ctx.norm(a, 1e-5)?),
                None => None,
            },
            Instr::SoftMax { a, mask, inplace } => match v(a) {
                Some(a) => {
                    let mask = mask.and_then(v);
                    Some(if inplace {
                        ctx.soft_max_ext_inplace(a, mask, 0.75, 0.0)?
                    } else {
                        ctx.soft_max_ext(a, mask, 0.75, 0.0)?
                    })
                }
                None => None,
            },
            Instr::MulMat { w, a } => match (pick(&square, w), v(a)) {
                (Some(w), Some(a)) => Some(ctx.mul_mat(w, a)?),
                _ => None,
            },
            Instr::Transpose { a } => match v(a) {
                Some(a) => {
                    let t = ctx.transpose(a)?;
                    let c = ctx.cont(t)?;
                    Some(ctx.reshape(c, [k, n])?)
                }
                None => None,
            },
            Instr::Concat { a, b, rows } => match (v(a), v(b)) {
                (Some(a), Some(b)) if rows && n > 1 => {
                    let m = n / 2;
                    let top = ctx.view_2d(a, k, m, row_bytes, 0)?;
                    let bottom = ctx.view_2d(b, k, n - m, row_bytes, m * row_bytes)?;
                    Some(ctx.concat(top, bottom, 1)?)
                }
                (Some(a), Some(b)) => {
                    let h = k / 2;
                    let left = ctx.view_2d(a, h, n, row_bytes, 0)?;
                    let right = ctx.view_2d(b, h, n, row_bytes, h * 4)?;
                    Some(ctx.concat(left, right, 0)?)
                }
                _ => None,
            },
            Instr::Cont { a } => v(a).map(|a| ctx.cont(a)).transpose()?,
            Instr::Dup { a } => v(a).map(|a| ctx.dup(a)).transpose()?,
            Instr::Cpy { a, dst, row0 } => match (v(a), pick(&p.dsts, dst)) {
                (Some(a), Some(dst)) => {
                    let row0 = row0 as usize % (DST_ROWS - n + 1);
                    let dst_row = ctx.desc(dst)?.nb[1];
                    let rows = ctx.view_2d(dst, k, n, dst_row, row0 * dst_row)?;
                    let out = ctx.cpy(a, rows)?;
                    result_or_output(ctx, &mut p, out)?
                }
                _ => None,
            },
            Instr::GetRows { w } => match pick(&table, w) {
                Some(w) => Some(ctx.get_rows(w, index)?),
                None => None,
            },
            Instr::SetRows { a, dst } => match (v(a), pick(&p.dsts, dst)) {
                (Some(a), Some(dst)) => {
                    let all = ctx.set_rows(dst, a, index)?;
                    let dst_row = ctx.desc(dst)?.nb[1];
                    // The rows the index input writes are not known here: read the first n back.
                    let first = ctx.view_2d(all, k, n, dst_row, 0)?;
                    result_or_output(ctx, &mut p, first)?
                }
                _ => None,
            },
            Instr::Rope { a, ff, inplace } => match v(a) {
                Some(a) => {
                    let ff = ff.and_then(|i| pick(&row, i));
                    let heads = ctx.reshape(a, [k, 1, n])?;
                    let params = RopeParams::new(k, RopeMode::Normal, 10_000.0);
                    let r = if inplace {
                        ctx.rope_inplace(heads, index, ff, params)?
                    } else {
                        ctx.rope(heads, index, ff, params)?
                    };
                    Some(ctx.reshape(r, [k, n])?)
                }
                None => None,
            },
            Instr::Output { a } => {
                if let Some(a) = v(a)
                    && !p.outputs.contains(&a)
                {
                    p.outputs.push(a);
                }
                None
            }
        };
        if let Some(t) = made {
            p.values.push(t);
        }
    }
    let last = *p.values.last().unwrap_or(&p.inputs[0]);
    if !p.outputs.contains(&last) {
        p.outputs.push(last);
    }
    for &o in &p.outputs {
        ctx.set_output(o)?;
    }
    Ok(p)
}

fn binary(ctx: &mut Context, op: u8, a: TensorId, b: TensorId, inplace: bool) -> Result<TensorId> {
    let op = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul][op as usize % 3];
    if inplace { ctx.binary_inplace(op, a, b) } else { ctx.binary(op, a, b) }
}

/// A write into a destination is always an output (so that it runs even when
/// nothing reads it); an F32 one is also a value (every value is F32).
fn result_or_output(ctx: &Context, p: &mut Program, t: TensorId) -> Result<Option<TensorId>> {
    p.outputs.push(t);
    Ok((ctx.desc(t)?.dtype == DType::F32).then_some(t))
}
