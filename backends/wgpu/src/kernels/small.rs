//! Plans for the small index ops of `index_ops.wgsl` (FILL, TRI, DIAG,
//! DIAG_MASK_ZERO, ADD1, ROLL, PAD_REFLECT_1D, ARANGE, XIELU,
//! TIMESTEP_EMBEDDING): one
//! invocation per result element, each reading at most one element of its
//! source. Shapes are checked as the CPU checks them, since the kernel
//! indexes the source by the result's position.

use gantry_engine::{DType, Op, TriType};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

/// The functions of `index_ops.wgsl`, in its `INDEX_OP` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexOp {
    /// FILL.
    Fill,
    /// TRI.
    Tri,
    /// DIAG.
    Diag,
    /// DIAG_MASK_ZERO.
    DiagMaskZero,
    /// ADD1.
    Add1,
    /// ROLL.
    Roll,
    /// PAD_REFLECT_1D.
    PadReflect1d,
    /// ARANGE.
    Arange,
    /// XIELU.
    Xielu,
    /// TIMESTEP_EMBEDDING.
    TimestepEmbedding,
}

impl IndexOp {
    /// Every function, in `INDEX_OP` order.
    pub const ALL: [IndexOp; 10] = [
        IndexOp::Fill,
        IndexOp::Tri,
        IndexOp::Diag,
        IndexOp::DiagMaskZero,
        IndexOp::Add1,
        IndexOp::Roll,
        IndexOp::PadReflect1d,
        IndexOp::Arange,
        IndexOp::Xielu,
        IndexOp::TimestepEmbedding,
    ];

    /// `INDEX_OP` of this function.
    pub fn index(self) -> u32 {
        Self::ALL.iter().position(|&x| x == self).unwrap_or(usize::MAX) as u32
    }
}

/// Plans the index op of node `b.d` (one of `IndexOp`'s ops).
pub(super) fn index_op(b: &mut Builder<'_>) -> Planned {
    let name = b.d.op.name();
    b.bind_dst()?;
    let op = match b.d.op {
        Op::Fill { c } => {
            b.params.f[0] = c;
            IndexOp::Fill
        }
        Op::Tri(kind) => {
            b.params.u[0] = TriType::ALL.iter().position(|&k| k == kind).unwrap_or(0) as u32;
            IndexOp::Tri
        }
        Op::Diag => IndexOp::Diag,
        Op::DiagMaskZero { n_past } => {
            // Past the row nothing is masked: n_past capped there keeps n_past + row in 32 bits.
            b.params.u[0] = n_past.min(b.d.ne[0]) as u32;
            IndexOp::DiagMaskZero
        }
        Op::Add1 => IndexOp::Add1,
        Op::Roll { shift } => {
            for i in 0..4 {
                // The shift as the equivalent one in 0..ne (an empty dim empties the node).
                let n = b.d.ne[i].max(1) as i64;
                b.params.u[4 + i] = i64::from(shift[i]).rem_euclid(n) as u32;
            }
            IndexOp::Roll
        }
        Op::PadReflect1d { p0, .. } => {
            b.params.u[0] = p0;
            IndexOp::PadReflect1d
        }
        Op::Arange { start, step, .. } => {
            b.params.f[..2].copy_from_slice(&[start, step]);
            IndexOp::Arange
        }
        Op::Xielu { alpha_n, alpha_p, beta, eps } => {
            b.params.f[..4].copy_from_slice(&[alpha_n, alpha_p, beta, eps]);
            IndexOp::Xielu
        }
        Op::TimestepEmbedding { dim, max_period } => {
            b.params.u[0] = dim / 2;
            // ln in f32, as the CPU computes it.
            b.params.f[0] = (max_period as f32).ln();
            IndexOp::TimestepEmbedding
        }
        _ => return Err(format!("{name} is not an index op")),
    };
    let dst = b.d;
    // F32 everywhere; FILL also F16, ADD1 and XIELU any float (as the CPU).
    let floats: &[DType] = match op {
        IndexOp::Fill => &[DType::F32, DType::F16],
        IndexOp::Add1 | IndexOp::Xielu => &[DType::F32, DType::F16, DType::BF16],
        _ => &[DType::F32],
    };
    if !floats.contains(&dst.dtype) {
        return Err(format!("{name} into {} has no wgpu kernel", dst.dtype));
    }
    if op == IndexOp::Arange {
        return b.finish(Kernel::IndexOp(op), DType::F32, groups_for(dst.nelements()));
    }
    let a = b.bind_src(0)?;
    let same_dtype = match op {
        IndexOp::Add1 | IndexOp::Xielu | IndexOp::Fill => a.dtype == dst.dtype,
        _ => a.dtype == DType::F32,
    };
    if !same_dtype {
        return Err(format!("{name} of {} into {} has no wgpu kernel", a.dtype, dst.dtype));
    }
    let fits = match op {
        IndexOp::Diag => a.ne[1] == 1 && dst.ne == [a.ne[0], a.ne[0], a.ne[2], a.ne[3]],
        IndexOp::TimestepEmbedding => {
            let Op::TimestepEmbedding { dim, .. } = dst.op else { return Err("not TIMESTEP_EMBEDDING".into()) };
            dst.ne == [dim as usize, a.ne[0], 1, 1]
        }
        IndexOp::PadReflect1d => {
            let Op::PadReflect1d { p0, p1 } = dst.op else { return Err("not PAD_REFLECT_1D".into()) };
            let m0 = a.ne[0];
            (p0 as usize) < m0 && (p1 as usize) < m0 && dst.ne == [m0 + (p0 + p1) as usize, a.ne[1], a.ne[2], a.ne[3]]
        }
        // (c + ne - shift) % ne stays in 32 bits.
        IndexOp::Roll => a.ne == dst.ne && a.ne.iter().all(|&n| n < 1 << 31),
        _ => a.ne == dst.ne,
    };
    if !fits {
        return Err(format!("{name} of {:?} into {:?} does not fit", a.ne, dst.ne));
    }
    if op == IndexOp::Add1 {
        let one = b.bind_src(1)?;
        if one.nelements() != 1 || !matches!(one.dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(format!("ADD1 of a {} {:?} has no wgpu kernel", one.dtype, one.ne));
        }
    }
    b.finish(Kernel::IndexOp(op), DType::F32, groups_for(dst.nelements()))
}
