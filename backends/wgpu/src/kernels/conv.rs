//! Plans for the direct convolutions of `conv.wgsl` (CONV_2D, CONV_2D_DW,
//! CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D): one invocation per result
//! element over an F32 or F16 kernel and an F32 image, into F32. The
//! channel shapes are checked as the CPU checks them (the kernel reads the
//! image by them); spatial positions are checked in the shader.

use gantry_engine::{ConvParams, DType, Op};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

/// The convolutions of `conv.wgsl`, in its `CONV_OP` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConvOp {
    /// CONV_2D.
    Conv2d,
    /// CONV_2D_DW.
    Conv2dDw,
    /// CONV_TRANSPOSE_1D.
    Transpose1d,
    /// CONV_TRANSPOSE_2D.
    Transpose2d,
}

impl ConvOp {
    /// `CONV_OP` of this convolution.
    pub fn index(self) -> u32 {
        match self {
            ConvOp::Conv2d => 0,
            ConvOp::Conv2dDw => 1,
            ConvOp::Transpose1d => 2,
            ConvOp::Transpose2d => 3,
        }
    }
}

pub(super) fn conv(b: &mut Builder<'_>) -> Planned {
    let name = b.d.op.name();
    b.bind_dst()?;
    let kernel = b.bind_src(0)?;
    let image = b.bind_src(1)?;
    if !matches!(kernel.dtype, DType::F32 | DType::F16) || image.dtype != DType::F32 || b.d.dtype != DType::F32 {
        return Err(format!("{name} of a {} kernel over {} has no wgpu kernel", kernel.dtype, image.dtype));
    }
    let (k, i, o) = (kernel.ne, image.ne, b.d.ne);
    let (op, fits, conv) = match b.d.op {
        Op::Conv2d(conv) => (ConvOp::Conv2d, k[2] == i[2] && o[2] == k[3] && o[3] == i[3], conv),
        Op::Conv2dDw(conv) => (ConvOp::Conv2dDw, k[2] == 1 && k[3] == i[2] && o[2] == i[2] && o[3] == i[3], conv),
        Op::ConvTranspose1d { stride } => {
            let fits = stride >= 1 && k[2] == i[1] && o[1] == k[1] && o[2] == 1 && o[3] == 1;
            (ConvOp::Transpose1d, fits, ConvParams { stride: [stride, 1], ..ConvParams::UNIT })
        }
        Op::ConvTranspose2d { stride } => {
            let fits = stride >= 1 && k[3] == i[2] && o[2] == k[2] && o[3] == i[3];
            (ConvOp::Transpose2d, fits, ConvParams { stride: [stride, stride], ..ConvParams::UNIT })
        }
        _ => return Err(format!("{name} is not a convolution")),
    };
    if !fits {
        return Err(format!("{name} of kernel {k:?} and image {i:?} into {o:?} does not fit"));
    }
    // Taps (o·s + k·d in 32 bits, as i32 in the shader).
    let reach =
        |dim: usize| (o[dim] as u64) * u64::from(conv.stride[dim]) + (k[dim] as u64) * u64::from(conv.dilation[dim]);
    if reach(0).max(reach(1)) >= 1 << 31 {
        return Err(format!("{name} positions do not fit 31 bits"));
    }
    let [s, p, d] = [conv.stride, conv.pad, conv.dilation];
    b.params.u = [s[0], s[1], p[0], p[1], d[0], d[1], 0, 0];
    b.finish(Kernel::Conv(op), DType::F32, groups_for(b.d.nelements()))
}
