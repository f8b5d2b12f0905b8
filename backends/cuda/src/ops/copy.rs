//! CPY / CONT / DUP, CONCAT, REPEAT, GET_ROWS and SET_ROWS (`copy.cu`,
//! `get_rows_q.cu`): the CPU's rules, except that quantizing on the GPU
//! (F32 into Q4_0 .. Q8_0) is not written yet, so those nodes stay on the CPU.

use gantry_engine::{DType, Op, TensorDesc, TensorId, tensor::can_repeat};

use super::{Planner, Refusal, dense_blocks, is_plain, require, src, strides_aligned};
use crate::kernels::{Kernel, Module};
use crate::launch::Launch;

fn aligned(ds: &[&TensorDesc]) -> Result<(), Refusal> {
    require(ds.iter().all(|d| strides_aligned(d)), || "strides are not whole elements".into())
}

/// Whether a tensor's blocks lie one after the other in logical order.
fn packed(d: &TensorDesc) -> bool {
    d.is_contiguous()
}

pub fn plan_copy(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (s_id, s) = src(p, d, 0)?;
    require(s.nelements() == d.nelements(), || format!("{} elements cannot become {}", s.nelements(), d.nelements()))?;
    if is_plain(s.dtype) && is_plain(d.dtype) {
        aligned(&[&s, d])?;
        let args = p.args(p.tensor(node)?, &[p.tensor(s_id)?]);
        p.launch_over(Kernel::new(Module::Copy, "cpy"), d.nelements(), args);
        return Ok(());
    }
    require(s.dtype == d.dtype && s.dtype.is_quantized(), || {
        format!("copying {} into {} (quantizing on the GPU is not implemented)", s.dtype, d.dtype)
    })?;
    require(dense_blocks(&s) && dense_blocks(d), || "rows are not dense blocks".into())?;
    let (dst, from) = (p.tensor(node)?, p.tensor(s_id)?);
    if packed(&s) && packed(d) {
        p.push(Launch::CopyBytes { dst: dst.data, src: from.data, bytes: d.nbytes() as u64 });
        return Ok(());
    }
    require(s.ne[0] == d.ne[0], || "a block copy between different row lengths needs packed tensors".into())?;
    let row_bytes = d.row_size();
    let mut args = p.args(dst, &[from]);
    args.i[0] = row_bytes as i64;
    p.launch_over(Kernel::new(Module::Copy, "copy_block_rows"), d.nrows() * row_bytes, args);
    Ok(())
}

pub fn plan_tile(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (a_id, a) = src(p, d, 0)?;
    require(is_plain(a.dtype) && a.dtype == d.dtype, || format!("{} of {} into {}", d.op.name(), a.dtype, d.dtype))?;
    aligned(&[&a, d])?;
    let dst = p.tensor(node)?;
    let x = p.tensor(a_id)?;
    match d.op {
        Op::Concat { dim } => {
            let (b_id, b) = src(p, d, 1)?;
            let dim = dim as usize;
            require(b.dtype == a.dtype, || format!("CONCAT of {} and {}", a.dtype, b.dtype))?;
            aligned(&[&b])?;
            let mut expect = a.ne;
            if dim < 4 {
                expect[dim] += b.ne[dim];
            }
            require(dim < 4 && d.ne == expect && (0..4).all(|i| i == dim || a.ne[i] == b.ne[i]), || {
                format!("{:?} and {:?} along dim {dim}", a.ne, b.ne)
            })?;
            let mut args = p.args(dst, &[x, p.tensor(b_id)?]);
            args.i[0] = dim as i64;
            p.launch_over(Kernel::new(Module::Copy, "concat"), d.nelements(), args);
        }
        _ => {
            require(can_repeat(a.ne, d.ne), || format!("{:?} does not tile {:?}", a.ne, d.ne))?;
            let args = p.args(dst, &[x]);
            p.launch_over(Kernel::new(Module::Copy, "repeat"), d.nelements(), args);
        }
    }
    Ok(())
}

pub fn plan_get_rows(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (a_id, a) = src(p, d, 0)?;
    let (i_id, idx) = src(p, d, 1)?;
    let out = if a.dtype == DType::I32 { DType::I32 } else { DType::F32 };
    require(idx.dtype == DType::I32 && d.dtype == out, || {
        format!("GET_ROWS of {} by {} into {}", a.dtype, idx.dtype, d.dtype)
    })?;
    let expect = [a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2]];
    require(d.ne == expect && a.ne[2] == idx.ne[1] && a.ne[3] == idx.ne[2] && idx.ne[3] == 1, || {
        format!("rows {:?} by indices {:?} into {:?}", a.ne, idx.ne, d.ne)
    })?;
    aligned(&[&idx, d])?;
    let kernel = if is_plain(a.dtype) {
        aligned(&[&a])?;
        Kernel::new(Module::Copy, "get_rows")
    } else {
        require(a.dtype.is_quantized() && dense_blocks(&a), || format!("GET_ROWS from {} rows", a.dtype))?;
        Kernel::new(Module::GetRowsQuant, "get_rows_q")
    };
    let args = p.args(p.tensor(node)?, &[p.tensor(a_id)?, p.tensor(i_id)?]);
    p.launch_over(kernel, d.nelements(), args);
    Ok(())
}

pub fn plan_set_rows(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (b_id, b) = src(p, d, 0)?;
    let (i_id, idx) = src(p, d, 1)?;
    require(b.dtype == DType::F32 && idx.dtype == DType::I32, || format!("SET_ROWS of {} by {}", b.dtype, idx.dtype))?;
    require(d.dtype.is_float(), || format!("SET_ROWS into {} (quantizing on the GPU is not implemented)", d.dtype))?;
    let fits = b.ne[0] == d.ne[0]
        && b.ne[2] == d.ne[2]
        && b.ne[3] == d.ne[3]
        && idx.ne[0] == b.ne[1]
        && idx.ne[1] > 0
        && idx.ne[2] > 0
        && idx.ne[3] == 1
        && b.ne[2].is_multiple_of(idx.ne[1])
        && b.ne[3].is_multiple_of(idx.ne[2]);
    require(fits, || format!("rows {:?} by indices {:?} into {:?}", b.ne, idx.ne, d.ne))?;
    aligned(&[&b, &idx, d])?;
    p.check_grid_yz(b.ne[2], b.ne[3])?;
    let args = p.args(p.tensor(node)?, &[p.tensor(b_id)?, p.tensor(i_id)?]);
    let blocks = b.ne[0].div_ceil(super::BLOCK as usize) as u32;
    p.launch(
        Kernel::new(Module::Copy, "set_rows"),
        [blocks, b.ne[2] as u32, b.ne[3] as u32],
        [super::BLOCK, 1, 1],
        0,
        args,
    );
    Ok(())
}
