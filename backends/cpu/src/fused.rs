//! Computing a fused group the scheduler's optimize system marked
//! ([`gantry_engine::sched::FusedGroup`]): the group's kernel when its nodes
//! still fit it, else the nodes one by one (always correct: every node of a
//! group is an ordinary node, and the unfused path writes every result).

use gantry_engine::sched::FusionKind;
use gantry_engine::{Context, Result, TensorId};

use super::compute_state::KernelMemory;
use super::ops::{self, mul_mat_shared, rms_norm_mul, rope_set_rows};
use super::parallel::Par;

/// Computes the nodes `members` of a fused group of `kind`.
pub fn compute_group(
    ctx: &Context,
    kind: FusionKind,
    members: &[TensorId],
    par: &Par<'_>,
    memory: &mut KernelMemory<'_>,
) -> Result<()> {
    let fused = match (kind, members) {
        (FusionKind::RmsNormMul, &[norm, mul]) => rms_norm_mul::compute(ctx, norm, mul, par)?,
        (FusionKind::SharedActivation, _) => mul_mat_shared::compute(ctx, members, par, memory.shared)?,
        (FusionKind::RopeSetRows, &[rope, rows, store]) => {
            rope_set_rows::compute(ctx, rope, rows, store, par, memory.rope_angles)?
        }
        _ => false,
    };
    if !fused {
        for &m in members {
            ops::compute_node(ctx, m, par, memory)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use gantry_engine::{BufferUsage, DType, SplitMix64};

    use super::*;
    use crate::parallel::PerThreadScratch;

    fn alloc_all(ctx: &mut Context, ts: &[TensorId]) {
        ctx.alloc_tensors(ts, &crate::buffer_type(), BufferUsage::Any).unwrap();
    }

    #[test]
    fn the_fused_kernels_take_their_groups_and_match_the_nodes_one_by_one() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let scratch = PerThreadScratch::new(2);
        let par = Par::new(&pool, 2, &scratch);
        let mut shared = Vec::new();
        let (k, rows) = (64, 3);
        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, [k, rows]).unwrap();
        let g = ctx.tensor(DType::F32, [k]).unwrap();
        let norm = ctx.rms_norm(x, 1e-6).unwrap();
        let mul = ctx.mul(norm, g).unwrap();
        let wq = ctx.tensor(DType::Q4_0, [k, 16]).unwrap();
        let wk = ctx.tensor(DType::Q4_0, [k, 8]).unwrap();
        let q = ctx.mul_mat(wq, mul).unwrap();
        let kk = ctx.mul_mat(wk, mul).unwrap();
        alloc_all(&mut ctx, &[x, g, norm, mul, wq, wk, q, kk]);
        ctx.set_f32(x, &SplitMix64::new(1).values(k * rows, -1.0, 1.0)).unwrap();
        ctx.set_f32(g, &SplitMix64::new(2).values(k, 0.5, 1.5)).unwrap();
        for (w, m, seed) in [(wq, 16, 3), (wk, 8, 4)] {
            let values = SplitMix64::new(seed).values(k * m, -1.0, 1.0);
            let row = DType::Q4_0.row_size(k).unwrap();
            let mut bytes = vec![0u8; row * m];
            for (src, dst) in values.chunks(k).zip(bytes.chunks_mut(row)) {
                gantry_engine::quant::quantize_row(DType::Q4_0, src, dst).unwrap();
            }
            ctx.write_tensor_bytes(w, 0, &bytes).unwrap();
        }
        // One by one.
        for t in [norm, mul, q, kk] {
            ops::compute_node(&ctx, t, &par, &mut KernelMemory::scratch_only(&mut shared)).unwrap();
        }
        let want: Vec<Vec<f32>> = [mul, q, kk].iter().map(|&t| ctx.read_f32(t).unwrap()).collect();
        // Fused: the norm's own result is left as it was.
        ctx.set_f32(norm, &vec![-7.0; k * rows]).unwrap();
        for t in [mul, q, kk] {
            ctx.set_f32(t, &vec![f32::NAN; ctx.desc(t).unwrap().nelements()]).unwrap();
        }
        assert!(rms_norm_mul::compute(&ctx, norm, mul, &par).unwrap(), "the pair is fusable");
        assert!(mul_mat_shared::compute(&ctx, &[q, kk], &par, &mut shared).unwrap(), "the products share src1");
        let got: Vec<Vec<f32>> = [mul, q, kk].iter().map(|&t| ctx.read_f32(t).unwrap()).collect();
        assert_eq!(got, want, "the same bits");
        assert!(ctx.read_f32(norm).unwrap().iter().all(|&v| v == -7.0), "the norm was not written");
        // A pair that is not the pattern is computed one by one.
        assert!(!rms_norm_mul::compute(&ctx, mul, norm, &par).unwrap());
        assert!(!mul_mat_shared::compute(&ctx, &[q, mul], &par, &mut shared).unwrap());
    }
}
