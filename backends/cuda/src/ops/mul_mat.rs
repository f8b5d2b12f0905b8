//! MUL_MAT. Float weights (F32, F16, BF16 with dense rows) through cuBLAS
//! (`cublasGemmStridedBatchedEx`, F32 accumulation and result; the
//! activations converted on the GPU to the weights' type first). Quantized
//! weights (Q4_0 .. Q6_K, IQ4_NL, IQ4_XS, MXFP4) with their activations quantized on the GPU to
//! Q8_1 and integer dot products (`mul_mat_q.cu`): a mat-vec for up to
//! `MMV_MAX_COLS` columns, a tiled product beyond.

use gantry_engine::{DType, TensorDesc, TensorId};

use super::{BLOCK, Planner, Refusal, dense_blocks, is_quantized_weight, packed_arg, require, src, strides_aligned};
use crate::kernels::{Kernel, MMQ_BM, MMQ_BN, MMV_MAX_COLS, MMV_WARPS, Module};
use crate::launch::{GemmLaunch, GemmType, Launch, TensorArg};

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (a_id, a) = src(p, d, 0)?;
    let (b_id, b) = src(p, d, 1)?;
    require(b.dtype == DType::F32 && d.dtype == DType::F32, || {
        format!("MUL_MAT with src1 {} into {}", b.dtype, d.dtype)
    })?;
    let ok = a.ne[0] == b.ne[0]
        && a.ne[2] > 0
        && a.ne[3] > 0
        && b.ne[2].is_multiple_of(a.ne[2])
        && b.ne[3].is_multiple_of(a.ne[3])
        && d.ne == [a.ne[1], b.ne[1], b.ne[2], b.ne[3]]
        && d.nb[0] == 4;
    require(ok, || format!("{:?} x {:?} does not give {:?}", a.ne, b.ne, d.ne))?;
    require(strides_aligned(&a) && strides_aligned(&b) && strides_aligned(d), || {
        "strides are not whole elements".into()
    })?;
    if is_quantized_weight(a.dtype) {
        plan_quantized(p, node, (a_id, &a), (b_id, &b))
    } else if a.dtype.is_float() {
        plan_blas(p, node, d, (a_id, &a), (b_id, &b))
    } else {
        Err(format!("MUL_MAT of {} weights", a.dtype))
    }
}

fn plan_quantized(
    p: &mut Planner<'_>,
    node: TensorId,
    (a_id, a): (TensorId, &TensorDesc),
    (b_id, b): (TensorId, &TensorDesc),
) -> Result<(), Refusal> {
    require(dense_blocks(a), || "weight rows are not dense blocks".into())?;
    let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    let chunks = k / 32;
    let batches = b.ne[2] * b.ne[3];
    let columns = b.nrows();
    // The activations, quantized: every column of every batch, in order.
    let act = p.scratch(columns * chunks * DType::Q8_1.bytes_per_block());
    let x = p.tensor(b_id)?;
    let args = p.args(packed_arg(DType::Q8_1, [k, n, b.ne[2], b.ne[3]], act), &[x]);
    p.launch_over(Kernel::new(Module::Quantize, "quantize_q8_1"), columns * chunks * 32, args);
    let packed = TensorArg { data: act, ..x };
    let mut args = p.args(p.tensor(node)?, &[p.tensor(a_id)?, packed]);
    args.i[0] = (b.ne[2] / a.ne[2]) as i64;
    args.i[1] = (b.ne[3] / a.ne[3]) as i64;
    args.i[2] = chunks as i64;
    if n <= MMV_MAX_COLS {
        p.check_grid_yz(batches, 1)?;
        let grid = [m.div_ceil(MMV_WARPS as usize) as u32, batches as u32, 1];
        p.launch(Kernel::new(Module::MulMatQuant, "mul_mat_vec_q"), grid, [32 * MMV_WARPS, 1, 1], 0, args);
    } else {
        let col_tiles = n.div_ceil(MMQ_BN as usize);
        p.check_grid_yz(col_tiles, batches)?;
        let grid = [m.div_ceil(MMQ_BM as usize) as u32, col_tiles as u32, batches as u32];
        p.launch(Kernel::new(Module::MulMatQuant, "mul_mat_q"), grid, [BLOCK, 1, 1], 0, args);
    }
    Ok(())
}

fn as_i32(v: usize, what: &str) -> Result<i32, Refusal> {
    i32::try_from(v).map_err(|_| format!("{what} {v} does not fit cuBLAS's 32 bits"))
}

fn plan_blas(
    p: &mut Planner<'_>,
    node: TensorId,
    d: &TensorDesc,
    (a_id, a): (TensorId, &TensorDesc),
    (b_id, b): (TensorId, &TensorDesc),
) -> Result<(), Refusal> {
    let es = a.dtype.bytes_per_block();
    require(a.ne[0] <= 1 || a.nb[0] == es, || "weight rows are not dense (cuBLAS reads rows)".into())?;
    let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    let lda = if m > 1 { a.nb[1] / es } else { k };
    let ldc = if n > 1 { d.nb[1] / 4 } else { m };
    require(lda >= k && ldc >= m, || "rows overlap (cuBLAS needs lda >= k, ldc >= m)".into())?;
    let ab_type = match a.dtype {
        DType::F32 => GemmType::F32,
        DType::F16 => GemmType::F16,
        _ => GemmType::BF16,
    };
    // B: src1 as it lies when it is packed F32 for F32 weights, else
    // converted on the GPU into packed rows of the weights' type.
    let b_arg = p.tensor(b_id)?;
    let b_data = if a.dtype == DType::F32 && b.is_contiguous() {
        b_arg.data
    } else {
        let data = p.scratch(b.nelements() * es);
        let args = p.args(packed_arg(a.dtype, b.ne, data), &[b_arg]);
        p.launch_over(Kernel::new(Module::Copy, "cpy"), b.nelements(), args);
        data
    };
    let a_data = p.tensor(a_id)?.data;
    let c_data = p.tensor(node)?.data;
    let (ne02, ne12, ne13) = (a.ne[2], b.ne[2], b.ne[3]);
    let (r2, r3) = (ne12 / ne02, ne13 / a.ne[3]);
    let (sa2, sa3) = (a.nb[2] / es, a.nb[3] / es);
    let (sb2, sb3) = (k * n, k * n * ne12);
    let (sd2, sd3) = (d.nb[2] / 4, d.nb[3] / 4);
    let (mi, ni, ki) = (as_i32(m, "m")?, as_i32(n, "n")?, as_i32(k, "k")?);
    let (lda, ldc) = (as_i32(lda, "lda")?, as_i32(ldc, "ldc")?);
    let gemm = |a_off: usize, stride_a: usize, b_off: usize, c_off: usize, batch: usize| -> Result<Launch, Refusal> {
        Ok(Launch::Gemm(GemmLaunch {
            ab_type,
            m: mi,
            n: ni,
            k: ki,
            a: (a_data + (a_off * es) as u64, lda, stride_a as i64),
            b: (b_data + (b_off * es) as u64, ki, sb2 as i64),
            c: (c_data + (c_off * 4) as u64, ldc, sd2 as i64),
            batch: as_i32(batch, "batch")?,
        }))
    };
    if r2 == 1 && r3 == 1 && (ne13 == 1 || (sa3 == ne02 * sa2 && sd3 == ne12 * sd2)) {
        p.push(gemm(0, sa2, 0, 0, ne12 * ne13)?);
        return Ok(());
    }
    for i3 in 0..ne13 {
        let a3 = (i3 / r3) * sa3;
        if r2 == 1 {
            p.push(gemm(a3, sa2, i3 * sb3, i3 * sd3, ne12)?);
        } else {
            // src0's batch j serves r2 consecutive batches of src1: stride 0.
            for j in 0..ne02 {
                p.push(gemm(a3 + j * sa2, 0, i3 * sb3 + j * r2 * sb2, i3 * sd3 + j * r2 * sd2, r2)?);
            }
        }
    }
    Ok(())
}
