//! MUL_MAT_ID and ADD_ID. Quantized experts (the weight types MUL_MAT
//! takes) have their activations quantized to Q8_1 once and one warp per
//! (weight row, slot) dotting them with the chosen expert's row
//! (`mul_mat_q.cu`); float experts (F32, F16, BF16) the same with float
//! loads (`experts.cu`). Every id is checked in the kernel before the
//! weights are read with it: a bad one writes NaN and the stream reports
//! `OutOfBounds` when it is synchronized.

use gantry_engine::{DType, TensorDesc, TensorId};

use super::{Planner, Refusal, dense_blocks, is_quantized_weight, packed_arg, require, src, strides_aligned};
use crate::kernels::{Kernel, MMV_WARPS, Module};
use crate::launch::TensorArg;

/// The grid of one warp per (weight row, slot): slots over y, then z.
fn slot_grid(p: &Planner<'_>, m: usize, slots: usize) -> Result<[u32; 3], Refusal> {
    let y = slots.clamp(1, 65535);
    let z = slots.div_ceil(y);
    p.check_grid_yz(y, z)?;
    Ok([m.div_ceil(MMV_WARPS as usize) as u32, y as u32, z as u32])
}

pub fn plan_mul_mat_id(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (a_id, a) = src(p, d, 0)?;
    let (b_id, b) = src(p, d, 1)?;
    let (ids_id, ids) = src(p, d, 2)?;
    require(b.dtype == DType::F32 && ids.dtype == DType::I32 && d.dtype == DType::F32, || {
        format!("MUL_MAT_ID with activations {} and ids {} into {}", b.dtype, ids.dtype, d.dtype)
    })?;
    let (k, m, n_used, n_tokens) = (a.ne[0], a.ne[1], ids.ne[0], ids.ne[1]);
    let ok = b.ne[0] == k
        && b.ne[1] > 0
        && n_used.is_multiple_of(b.ne[1])
        && b.ne[2] == n_tokens
        && d.ne == [m, n_used, n_tokens, 1]
        && d.nb[0] == 4;
    require(ok, || format!("experts {:?} x {:?} with ids {:?} does not give {:?}", a.ne, b.ne, ids.ne, d.ne))?;
    require(strides_aligned(&a) && strides_aligned(&b) && strides_aligned(&ids) && strides_aligned(d), || {
        "strides are not whole elements".into()
    })?;
    let grid = slot_grid(p, m, n_used * n_tokens)?;
    let block = [32 * MMV_WARPS, 1, 1];
    let (dst, w, ids_arg) = (p.tensor(node)?, p.tensor(a_id)?, p.tensor(ids_id)?);
    if is_quantized_weight(a.dtype) {
        require(dense_blocks(&a) && k.is_multiple_of(32), || "expert rows are not dense blocks".into())?;
        let chunks = k / 32;
        let rows = b.nrows();
        let act = p.scratch(rows * chunks * DType::Q8_1.bytes_per_block());
        let x = p.tensor(b_id)?;
        let args = p.args(packed_arg(DType::Q8_1, b.ne, act), &[x]);
        p.launch_over(Kernel::new(Module::Quantize, "quantize_q8_1"), rows * chunks * 32, args);
        let packed = TensorArg { data: act, ..x };
        let mut args = p.args(dst, &[w, packed, ids_arg]);
        args.i[2] = chunks as i64;
        p.launch(Kernel::new(Module::MulMatQuant, "mul_mat_id_vec_q"), grid, block, 0, args);
    } else if a.dtype.is_float() {
        let args = p.args(dst, &[w, p.tensor(b_id)?, ids_arg]);
        p.launch(Kernel::new(Module::Experts, "mul_mat_id_f"), grid, block, 0, args);
    } else {
        return Err(format!("MUL_MAT_ID of {} experts", a.dtype));
    }
    Ok(())
}

pub fn plan_add_id(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (a_id, a) = src(p, d, 0)?;
    let (b_id, b) = src(p, d, 1)?;
    let (ids_id, ids) = src(p, d, 2)?;
    let types_ok = a.dtype == DType::F32 && b.dtype == DType::F32 && ids.dtype == DType::I32 && d.dtype == DType::F32;
    require(types_ok, || "ADD_ID reads f32 rows and biases and i32 ids".into())?;
    require(a.ne == d.ne && b.ne[0] == d.ne[0] && ids.ne[0] == d.ne[1] && ids.ne[1] == d.ne[2], || {
        format!("{:?} + {:?} by ids {:?} does not give {:?}", a.ne, b.ne, ids.ne, d.ne)
    })?;
    require(strides_aligned(&a) && strides_aligned(&b) && strides_aligned(&ids) && strides_aligned(d), || {
        "strides are not whole elements".into()
    })?;
    let args = p.args(p.tensor(node)?, &[p.tensor(a_id)?, p.tensor(b_id)?, p.tensor(ids_id)?]);
    p.launch_over(Kernel::new(Module::Experts, "add_id"), d.nelements(), args);
    Ok(())
}
