//! Plans for MUL_MAT: a matrix-vector kernel for few src1 columns, a tiled
//! one otherwise; src0 plain or quantized (dequantized in the shader).

use gantry_engine::DType;

use super::shader::Store;
use super::{Builder, Kernel, Launch, QUANTIZED, Refusal, load_store};

type Planned = Result<Option<Launch>, Refusal>;

/// Up to this many src1 columns (ggml's GPU backends use the same bound) the
/// matrix-vector kernel, dequantizing each weight once for all columns,
/// beats a 64-wide tile that would be mostly empty: on lavapipe a 5-token
/// Q4_1 1536 x 576 product takes 69 ms rather than 269 ms tiled.
/// `MAX_COLS` in `mul_mat_vec.wgsl` (see [`super::shared_constants`]).
pub const MAX_VEC_COLUMNS: usize = 8;
/// src0 rows per workgroup of the matrix-vector kernel (`ROWS` in `mul_mat_vec.wgsl`).
pub(super) const VEC_ROWS: u64 = 4;
/// Result tile side of the tiled kernel (`BM`, `BN` in `mul_mat.wgsl`).
pub(super) const TILE: u64 = 64;

// `mul_mat.wgsl` loads a tile row per invocation of its 64 and keeps 8 x 8
// results per invocation: a 64 x 64 tile.
const _: () = assert!(TILE == 64);

pub(super) fn mul_mat(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let x = b.bind_src(1)?;
    if x.dtype != DType::F32 {
        return Err(format!("MUL_MAT src1 must be f32, not {}", x.dtype));
    }
    let (t, w) = b.src(0)?;
    let store = if QUANTIZED.contains(&w.dtype) {
        Store::Bytes
    } else {
        load_store(w.dtype, b.caps).filter(|&s| s != Store::I32).ok_or_else(|| format!("no kernel for {}", w.dtype))?
    };
    b.bind(1, t, w, store)?;
    let (ne01, ne11) = (w.ne[1] as u64, x.ne[1] as u64);
    let batches = (x.ne[2] * x.ne[3]) as u64;
    if x.ne[1] <= MAX_VEC_COLUMNS {
        b.finish(Kernel::MulMatVec, w.dtype, ne01.div_ceil(VEC_ROWS) * batches)
    } else {
        b.finish(Kernel::MulMat, w.dtype, ne01.div_ceil(TILE) * ne11.div_ceil(TILE) * batches)
    }
}
