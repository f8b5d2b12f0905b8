//! A small F32 interpreter that computes a graph through the context's
//! placements (reading and writing the tensors' bytes where they are
//! placed), so that a wrong overlap in a memory plan shows up as a wrong
//! result. Covers the ops the random graphs use.

use crate::{BinaryOp, Context, Error, Graph, Op, Result, TensorId, UnaryOp};

fn unary(op: UnaryOp, x: f32) -> Result<f32> {
    Ok(match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sqr => x * x,
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        other => return Err(not_interpreted(other.name())),
    })
}

fn not_interpreted(op: &str) -> Error {
    Error::Unsupported(format!("the test interpreter does not compute {op}"))
}

/// Computes every node of `graph` in order.
pub fn compute(ctx: &mut Context, graph: Graph<'_>) -> Result<()> {
    for &t in graph.nodes() {
        compute_node(ctx, t)?;
    }
    Ok(())
}

fn compute_node(ctx: &mut Context, t: TensorId) -> Result<()> {
    let d = *ctx.desc(t)?;
    let missing =
        |i: usize| Error::InvalidTensor { tensor: format!("{t:?}"), reason: format!("source {i} is missing") };
    let src = |i: usize| d.srcs[i].ok_or_else(|| missing(i));
    let out: Vec<f32> = match d.op {
        Op::None | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => return Ok(()),
        Op::Unary(u) => ctx.read_f32(src(0)?)?.into_iter().map(|x| unary(u, x)).collect::<Result<_>>()?,
        Op::Scale { scale, bias } => ctx.read_f32(src(0)?)?.into_iter().map(|x| x * scale + bias).collect(),
        Op::Cont | Op::Dup => ctx.read_f32(src(0)?)?,
        Op::Binary(op) => {
            let a = ctx.read_f32(src(0)?)?;
            let b = ctx.read_f32(src(1)?)?;
            let (na, nb) = (d.ne, ctx.desc(src(1)?)?.ne);
            (0..a.len())
                .map(|i| {
                    // Index of a's element i in the repeated b.
                    let (mut rest, mut j, mut stride) = (i, 0, 1);
                    for k in 0..4 {
                        let c = rest % na[k];
                        rest /= na[k];
                        j += (c % nb[k]) * stride;
                        stride *= nb[k];
                    }
                    let y = b[j];
                    match op {
                        BinaryOp::Add => a[i] + y,
                        BinaryOp::Sub => a[i] - y,
                        BinaryOp::Mul => a[i] * y,
                        BinaryOp::Div => a[i] / y,
                    }
                })
                .collect()
        }
        Op::SumRows => ctx.read_f32(src(0)?)?.chunks(ctx.desc(src(0)?)?.ne[0]).map(|r| r.iter().sum()).collect(),
        Op::RmsNorm { eps } => {
            let x = ctx.read_f32(src(0)?)?;
            let mut y = Vec::with_capacity(x.len());
            for row in x.chunks(d.ne[0]) {
                let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
                let k = 1.0 / (ms + eps).sqrt();
                y.extend(row.iter().map(|v| v * k));
            }
            y
        }
        Op::Concat { dim } => {
            let (a, b) = (ctx.read_f32(src(0)?)?, ctx.read_f32(src(1)?)?);
            let (na, nb) = (ctx.desc(src(0)?)?.ne, ctx.desc(src(1)?)?.ne);
            let dim = dim as usize;
            // Elements below `dim` form blocks; blocks alternate between a and b.
            let inner_a: usize = na[..=dim].iter().product();
            let inner_b: usize = nb[..=dim].iter().product();
            let mut y = Vec::with_capacity(a.len() + b.len());
            for (ca, cb) in a.chunks(inner_a).zip(b.chunks(inner_b)) {
                y.extend_from_slice(ca);
                y.extend_from_slice(cb);
            }
            y
        }
        other => return Err(not_interpreted(other.name())),
    };
    ctx.set_f32(t, &out)
}
