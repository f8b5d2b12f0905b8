//! Computing a fused group the scheduler's optimize system marked
//! ([`gantry_engine::sched::FusedGroup`]): the group's kernel when its nodes
//! still fit it, else the nodes one by one (always correct: every node of a
//! group is an ordinary node, and the unfused path writes every result).

use gantry_engine::sched::FusionKind;
use gantry_engine::{Context, Result, TensorId};

use super::ops::{self, mul_mat_shared, rms_norm_mul};
use super::parallel::Par;

/// Computes the nodes `members` of a fused group of `kind`.
pub fn compute_group(
    ctx: &Context,
    kind: FusionKind,
    members: &[TensorId],
    par: &Par<'_>,
    shared: &mut Vec<f32>,
) -> Result<()> {
    let fused = match (kind, members) {
        (FusionKind::RmsNormMul, &[norm, mul]) => rms_norm_mul::compute(ctx, norm, mul, par)?,
        (FusionKind::SharedActivation, _) => mul_mat_shared::compute(ctx, members, par, shared)?,
        _ => false,
    };
    if !fused {
        for &m in members {
            ops::compute_node(ctx, m, par, shared)?;
        }
    }
    Ok(())
}
