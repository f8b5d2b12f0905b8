//! The numbers a kernel's plan and its WGSL both depend on, spelled once,
//! here in Rust: [`shared_constants`] writes them as WGSL `const`
//! declarations that [`super::source`] puts before the kernel's body, and the
//! `.wgsl` files use them without defining them (sizes that follow from them,
//! such as workgroup arrays, are computed from them in the WGSL).
//!
//! | WGSL | Rust | kernels |
//! |---|---|---|
//! | `WORKGROUP_SIZE` | [`ELEMENT_WORKGROUP`] | one invocation per element (or per 8 of GET_ROWS from quantized rows): the plan counts workgroups of it |
//! | `WORKGROUP_SIZE` | [`QUANTIZE_WORKGROUP`] | quantizing CPY / SET_ROWS, one invocation per block |
//! | `ROWS`, `MAX_COLS` | `matmul::VEC_ROWS`, [`MAX_VEC_COLUMNS`] | `mul_mat_vec.wgsl` |
//! | `ROWS` | `matmul::VEC_ROWS` | `mul_mat_id.wgsl` |
//! | `BM`, `BN` | `matmul::TILE` | `mul_mat.wgsl` |
//! | `MAX_DK`, `MAX_DV` | `attention::MAX_DK`, `attention::MAX_DV` | `flash_attn.wgsl` |
//!
//! Kernels with one workgroup per row (NORM, L2_NORM, SOFT_MAX, SUM,
//! SUM_ROWS, ARGMAX), per group (GROUP_NORM) or one in all (COUNT_EQUAL)
//! size their workgroups in the WGSL alone: their plans count rows or groups.
//! SSM_SCAN's `WORKGROUP_SIZE` counts state rows (one invocation each), as
//! do RWKV_WKV6's, GATED_LINEAR_ATTN's, RWKV_WKV7's and GATED_DELTA_NET's
//! (a state row or column per invocation), SOLVE_TRI's right-hand-side columns.

use std::fmt::Write;

use super::attention::{MAX_DK, MAX_DV};
use super::matmul::{MAX_VEC_COLUMNS, TILE, VEC_ROWS};
use super::{Kernel, KernelKey};

/// Invocations per workgroup of the kernels with one invocation per element
/// (`WORKGROUP_SIZE` in their WGSL; [`super::groups_for`] counts by it).
pub(super) const ELEMENT_WORKGROUP: u64 = 256;

/// Invocations per workgroup of the quantizing copies, one per block
/// (`WORKGROUP_SIZE` in `quantize.wgsl`; [`super::quantize_groups`] counts by it).
pub(super) const QUANTIZE_WORKGROUP: u64 = 64;

/// The `const` declarations `key`'s kernel is compiled with (empty for a
/// kernel that shares no number with its plan).
pub(super) fn shared_constants(key: &KernelKey) -> String {
    let mut wgsl = String::new();
    let mut constant = |name: &str, value: u64| {
        let _ = writeln!(wgsl, "const {name}: u32 = {value}u;");
    };
    match key.kernel {
        Kernel::Map(_)
        | Kernel::Binary(_)
        | Kernel::Glu { .. }
        | Kernel::Copy
        | Kernel::Concat
        | Kernel::Repeat
        | Kernel::GetRows
        | Kernel::GetRowsQuant
        | Kernel::SetRows
        | Kernel::DiagMaskInf
        | Kernel::Rope
        | Kernel::SwigluOai { .. }
        | Kernel::AddId
        | Kernel::Sort
        | Kernel::Cumsum
        | Kernel::Im2col { .. }
        | Kernel::Pool2d
        | Kernel::Upscale
        | Kernel::Pad
        | Kernel::SsmConv
        | Kernel::SsmScan
        | Kernel::IndexOp(_)
        | Kernel::Conv(_)
        | Kernel::SetAcc { .. }
        | Kernel::SolveTri
        | Kernel::LinearAttn(_)
        | Kernel::DeltaNet
        | Kernel::Window { .. }
        | Kernel::GetRelPos
        | Kernel::AddRelPos => constant("WORKGROUP_SIZE", ELEMENT_WORKGROUP),
        Kernel::Quantize { .. } => constant("WORKGROUP_SIZE", QUANTIZE_WORKGROUP),
        Kernel::MulMatId => constant("ROWS", VEC_ROWS),
        Kernel::MulMatVec => {
            constant("ROWS", VEC_ROWS);
            constant("MAX_COLS", MAX_VEC_COLUMNS as u64);
        }
        Kernel::MulMat => {
            constant("BM", TILE);
            constant("BN", TILE);
        }
        Kernel::FlashAttn => {
            constant("MAX_DK", MAX_DK as u64);
            constant("MAX_DV", MAX_DV as u64);
        }
        Kernel::SumRows
        | Kernel::Sum
        | Kernel::Argmax
        | Kernel::Norm { .. }
        | Kernel::L2Norm
        | Kernel::SoftMax
        | Kernel::GroupNorm
        | Kernel::CountEqual => {}
    }
    wgsl
}

#[cfg(test)]
mod tests {
    use gantry_engine::{BinaryOp, DType, GluOp, UnaryOp};

    use super::super::{MapOp, source};
    use super::*;
    use crate::kernels::shader::Store;

    fn key(kernel: Kernel, dtype: DType) -> KernelKey {
        let mut stores = [Store::Unused; crate::gpu::STORAGE_SLOTS];
        stores[..4].fill(Store::F32);
        KernelKey { kernel, stores, dtype }
    }

    /// Every kernel's source defines each shared constant exactly once (the
    /// prepended line: a `.wgsl` file that defined it again would not
    /// compile), and the K-quant dequantizers `scale_min_k4` once.
    #[test]
    fn shared_constants_are_defined_once_in_every_source() {
        let kernels = [
            Kernel::Map(MapOp::Unary(UnaryOp::Silu)),
            Kernel::Binary(BinaryOp::Add),
            Kernel::Glu { op: GluOp::Swiglu, split: false },
            Kernel::Copy,
            Kernel::Concat,
            Kernel::Repeat,
            Kernel::GetRows,
            Kernel::GetRowsQuant,
            Kernel::SetRows,
            Kernel::SumRows,
            Kernel::Sum,
            Kernel::Argmax,
            Kernel::Norm { rms: true },
            Kernel::SoftMax,
            Kernel::DiagMaskInf,
            Kernel::Rope,
            Kernel::Quantize { set_rows: false },
            Kernel::MulMatVec,
            Kernel::MulMat,
            Kernel::FlashAttn,
            Kernel::Im2col { is_2d: true },
            Kernel::Im2col { is_2d: false },
            Kernel::Pool2d,
            Kernel::Upscale,
            Kernel::Pad,
            Kernel::GroupNorm,
            Kernel::L2Norm,
            Kernel::SsmConv,
            Kernel::SsmScan,
            Kernel::IndexOp(super::super::IndexOp::Xielu),
            Kernel::Conv(super::super::ConvOp::Conv2d),
            Kernel::SetAcc { add: true },
            Kernel::CountEqual,
            Kernel::SolveTri,
            Kernel::LinearAttn(super::super::LinearAttn::Wkv6),
            Kernel::LinearAttn(super::super::LinearAttn::Gla),
            Kernel::LinearAttn(super::super::LinearAttn::Wkv7),
            Kernel::DeltaNet,
            Kernel::Window { unpart: true },
            Kernel::GetRelPos,
            Kernel::AddRelPos,
        ];
        for kernel in kernels {
            for dtype in [DType::F32, DType::Q4_K, DType::Q5_K] {
                let key = key(kernel, dtype);
                let src = source(&key);
                for line in shared_constants(&key).lines() {
                    let name = line.split(':').next().unwrap_or(line);
                    assert_eq!(src.matches(&format!("{name}:")).count(), 1, "{kernel:?}: {name}");
                }
                if dtype != DType::F32 && matches!(kernel, Kernel::GetRowsQuant | Kernel::MulMatVec | Kernel::MulMat) {
                    assert_eq!(src.matches("fn scale_min_k4(").count(), 1, "{kernel:?} {dtype}");
                }
            }
        }
        assert!(source(&key(Kernel::MulMatVec, DType::F32)).contains("const MAX_COLS: u32 = 8u;"));
        assert!(source(&key(Kernel::Copy, DType::F32)).contains("const WORKGROUP_SIZE: u32 = 256u;"));
        assert!(
            source(&key(Kernel::Quantize { set_rows: true }, DType::Q8_0)).contains("const WORKGROUP_SIZE: u32 = 64u;")
        );
    }
}
