//! Plans for the mixture-of-experts ops: MUL_MAT_ID (plain or quantized
//! experts, one workgroup per few rows of one slot) and ADD_ID. Their
//! shaders check every id before reading with it.

use gantry_engine::DType;

use super::matmul::VEC_ROWS;
use super::shader::Store;
use super::{Builder, Kernel, Launch, QUANTIZED, Refusal, groups_for, load_store};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn mul_mat_id(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let x = b.bind_src(1)?;
    let ids = b.bind_src(2)?;
    if x.dtype != DType::F32 || ids.dtype != DType::I32 {
        return Err(format!("MUL_MAT_ID reads f32 activations and i32 ids, not {} and {}", x.dtype, ids.dtype));
    }
    let (t, w) = b.src(0)?;
    let store = if QUANTIZED.contains(&w.dtype) {
        Store::Bytes
    } else {
        load_store(w.dtype, b.caps).filter(|&s| s != Store::I32).ok_or_else(|| format!("no kernel for {}", w.dtype))?
    };
    b.bind(1, t, w, store)?;
    let slots = (b.d.ne[1] * b.d.ne[2]) as u64;
    b.finish(Kernel::MulMatId, w.dtype, (w.ne[1] as u64).div_ceil(VEC_ROWS) * slots)
}

pub(super) fn add_id(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    let bias = b.bind_src(1)?;
    let ids = b.bind_src(2)?;
    if a.dtype != DType::F32 || bias.dtype != DType::F32 || ids.dtype != DType::I32 {
        return Err("ADD_ID reads f32 rows and biases and i32 ids".into());
    }
    b.finish(Kernel::AddId, DType::F32, groups_for(b.d.nelements()))
}
