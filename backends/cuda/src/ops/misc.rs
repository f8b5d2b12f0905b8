//! The small ops of `misc.cu`: FILL, TRI, DIAG, SET, ACC, ADD1,
//! COUNT_EQUAL, ARANGE and TIMESTEP_EMBEDDING, with the CPU's dtypes and
//! its shape checks (the kernels index by the shapes).

use gantry_engine::{DType, Op, TensorDesc, TensorId, TensorLayout, TriType};

use super::{BLOCK, Planner, Refusal, is_float, require, src, strides_aligned};
use crate::kernels::{Kernel, Module};

fn kernel(name: &'static str) -> Kernel {
    Kernel::new(Module::Misc, name)
}

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    require(strides_aligned(d), || "result strides are not whole elements".into())?;
    let dst = p.tensor(node)?;
    let n = d.nelements();
    match d.op {
        Op::Fill { c } => {
            let (_, a) = src(p, d, 0)?;
            require(matches!(a.dtype, DType::F32 | DType::F16) && a.dtype == d.dtype && a.ne == d.ne, || {
                format!("FILL of {} {:?} into {} {:?}", a.dtype, a.ne, d.dtype, d.ne)
            })?;
            let mut args = p.args(dst, &[]);
            args.f[0] = c;
            p.launch_over(kernel("fill"), n, args);
        }
        Op::Tri(_) | Op::Diag => {
            let (a_id, a) = src(p, d, 0)?;
            let expect = if d.op == Op::Diag { [a.ne[0], a.ne[0], a.ne[2], a.ne[3]] } else { a.ne };
            let ok = a.dtype == DType::F32
                && d.dtype == DType::F32
                && d.ne == expect
                && (d.op != Op::Diag || a.ne[1] == 1)
                && strides_aligned(&a);
            require(ok, || format!("{} of {} {:?} into {:?}", d.op.name(), a.dtype, a.ne, d.ne))?;
            let mut args = p.args(dst, &[p.tensor(a_id)?]);
            if let Op::Tri(kind) = d.op {
                // The kernel's code of a kind is its position in ggml's order.
                args.i[0] = TriType::ALL.iter().position(|&k| k == kind).unwrap_or(0) as i64;
                p.launch_over(kernel("tri"), n, args);
            } else {
                p.launch_over(kernel("diag"), n, args);
            }
        }
        Op::Set { nb, offset } | Op::Acc { nb, offset } => plan_set_acc(p, node, d, nb, offset)?,
        Op::Add1 => {
            let (a_id, a) = src(p, d, 0)?;
            let (b_id, b) = src(p, d, 1)?;
            let ok = is_float(a.dtype)
                && a.dtype == d.dtype
                && is_float(b.dtype)
                && a.ne == d.ne
                && b.nelements() == 1
                && strides_aligned(&a);
            require(ok, || format!("ADD1 of {} {:?} and {} {:?}", a.dtype, a.ne, b.dtype, b.ne))?;
            let args = p.args(dst, &[p.tensor(a_id)?, p.tensor(b_id)?]);
            p.launch_over(kernel("add1"), n, args);
        }
        Op::CountEqual => {
            let (a_id, a) = src(p, d, 0)?;
            let (b_id, b) = src(p, d, 1)?;
            let ok = a.dtype == DType::I32
                && b.dtype == DType::I32
                && d.dtype == DType::I32
                && a.ne == b.ne
                && n == 1
                && strides_aligned(&a)
                && strides_aligned(&b);
            require(ok, || format!("COUNT_EQUAL of {} {:?} and {} {:?}", a.dtype, a.ne, b.dtype, b.ne))?;
            let args = p.args(dst, &[p.tensor(a_id)?, p.tensor(b_id)?]);
            // One block counts everything (see `misc.cu`).
            p.launch(kernel("count_equal"), [1, 1, 1], [BLOCK, 1, 1], 0, args);
        }
        Op::Arange { start, step, .. } => {
            require(d.dtype == DType::F32, || format!("ARANGE into {}", d.dtype))?;
            let mut args = p.args(dst, &[]);
            (args.f[0], args.f[1]) = (start, step);
            p.launch_over(kernel("arange"), n, args);
        }
        Op::TimestepEmbedding { dim, max_period } => {
            let (t_id, t) = src(p, d, 0)?;
            let ok = t.dtype == DType::F32 && d.dtype == DType::F32 && d.ne == [dim as usize, t.ne[0], 1, 1];
            require(ok, || format!("TIMESTEP_EMBEDDING of {} {:?} into {:?}", t.dtype, t.ne, d.ne))?;
            let mut args = p.args(dst, &[p.tensor(t_id)?]);
            // ln(max_period) in f32, as the CPU computes it.
            args.f[0] = (max_period as f32).ln();
            args.i[0] = i64::from(dim / 2);
            p.launch_over(kernel("timestep_embedding"), n, args);
        }
        _ => return Err(format!("{} is not one of the small ops", d.op.name())),
    }
    Ok(())
}

/// SET / ACC: src0 copied into the result, then src1 written over (added
/// to) the view at byte `offset` with strides `nb`, checked as the CPU
/// checks it: inside the contiguous result, whole and distinct elements.
fn plan_set_acc(
    p: &mut Planner<'_>,
    node: TensorId,
    d: &TensorDesc,
    nb: [usize; 3],
    offset: usize,
) -> Result<(), Refusal> {
    let (a_id, a) = src(p, d, 0)?;
    let (b_id, b) = src(p, d, 1)?;
    let add = matches!(d.op, Op::Acc { .. });
    let dtype_ok = if add { d.dtype == DType::F32 } else { matches!(d.dtype, DType::F32 | DType::I32) };
    require(dtype_ok && a.dtype == d.dtype && b.dtype == d.dtype, || {
        format!("{} of {} and {} into {}", d.op.name(), a.dtype, b.dtype, d.dtype)
    })?;
    let es = d.dtype.bytes_per_block();
    let view_nb = [es, nb[0], nb[1], nb[2]];
    let last = (0..4).try_fold(offset, |acc, i| acc.checked_add(b.ne[i].saturating_sub(1).checked_mul(view_nb[i])?));
    let view = TensorLayout { dtype: d.dtype, ne: b.ne, nb: view_nb };
    let ok = a.ne == d.ne
        && d.is_contiguous()
        && last.is_some_and(|l| l + es <= d.nelements() * es)
        && offset.is_multiple_of(es)
        && view_nb.iter().all(|s| s.is_multiple_of(es))
        && !view.overlaps_itself()
        && strides_aligned(&a)
        && strides_aligned(&b);
    require(ok, || format!("{} of {:?} at byte {offset} with strides {nb:?} into {:?}", d.op.name(), b.ne, d.ne))?;
    let i64_of = |v: usize| i64::try_from(v).map_err(|_| format!("{} byte offset {v}", d.op.name()));
    let (dst, x, y) = (p.tensor(node)?, p.tensor(a_id)?, p.tensor(b_id)?);
    p.launch_over(kernel("copy_same"), d.nelements(), p.args(dst, &[x]));
    if b.nelements() > 0 {
        let mut args = p.args(dst, &[x, y]);
        args.i[..4].copy_from_slice(&[i64_of(offset)?, i64_of(nb[0])?, i64_of(nb[1])?, i64_of(nb[2])?]);
        args.i[4] = i64::from(add);
        p.launch_over(kernel("set_view"), b.nelements(), args);
    }
    Ok(())
}
