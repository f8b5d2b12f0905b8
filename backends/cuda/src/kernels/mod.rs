//! The CUDA C kernel sources, embedded in the binary and compiled by NVRTC
//! at first use ([`super::nvrtc`]).
//!
//! A module's source is composed of: the constants a kernel shares with its
//! Rust plan ([`constants`](mod@constants), spelled once, in Rust), `prelude.cuh` (the
//! `Tensor` / `Args` parameter block, the f16 / bf16 conversions, loads,
//! stores and reductions: no CUDA header is included anywhere), the helper
//! libraries the module needs (`quant_blocks.cuh`, `quantize.cu`'s block
//! type), then the module's own `.cu` file. [`Module::ALL`] lists every
//! module with its entry points; the compile test builds each for sm_80,
//! sm_86, sm_89 and sm_90 through the same path the backend uses.

pub mod constants;

pub use constants::{ARGS_BYTES, FA_MAX_DV, FA_WARPS, MMQ_BM, MMQ_BN, MMQ_KC, MMV_MAX_COLS, MMV_WARPS, constants};

const PRELUDE: &str = include_str!("prelude.cuh");
const QUANT_BLOCKS: &str = include_str!("quant_blocks.cuh");
const ELEMENTWISE: &str = include_str!("elementwise.cu");
const COPY: &str = include_str!("copy.cu");
const GET_ROWS_Q: &str = include_str!("get_rows_q.cu");
const QUANTIZE: &str = include_str!("quantize.cu");
const MUL_MAT_Q: &str = include_str!("mul_mat_q.cu");
const REDUCE: &str = include_str!("reduce.cu");
const NORM: &str = include_str!("norm.cu");
const ROPE: &str = include_str!("rope.cu");
const FLASH_ATTN: &str = include_str!("flash_attn.cu");
const EXPERTS: &str = include_str!("experts.cu");
const VISION: &str = include_str!("vision.cu");
const SSM: &str = include_str!("ssm.cu");
const CONV: &str = include_str!("conv.cu");
const MISC: &str = include_str!("misc.cu");

/// One compiled unit: a group of kernels built together from one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Module {
    /// Unary functions, SCALE, CLAMP, XIELU, binary ops, GLUs, DIAG_MASK_INF / _ZERO.
    Elementwise,
    /// CPY / CONT / DUP, block copies, CONCAT, REPEAT, GET_ROWS, SET_ROWS.
    Copy,
    /// GET_ROWS from quantized rows.
    GetRowsQuant,
    /// Quantizing activations to Q8_1.
    Quantize,
    /// The quantized mat-vec and matrix product, and MUL_MAT_ID's quantized mat-vec.
    MulMatQuant,
    /// SUM, SUM_ROWS, MEAN, ARGMAX.
    Reduce,
    /// NORM, RMS_NORM, L2_NORM, SOFT_MAX.
    Norm,
    /// ROPE.
    Rope,
    /// FLASH_ATTN_EXT.
    FlashAttn,
    /// MUL_MAT_ID with float experts, ADD_ID, ARGSORT / TOP_K, CUMSUM.
    Experts,
    /// IM2COL, POOL_2D, UPSCALE, PAD, GROUP_NORM.
    Vision,
    /// SSM_CONV, SSM_SCAN.
    Ssm,
    /// CONV_2D, CONV_2D_DW, CONV_TRANSPOSE_1D / 2D, POOL_1D, PAD_REFLECT_1D, ROLL.
    Conv,
    /// FILL, TRI, DIAG, SET, ACC, ADD1, COUNT_EQUAL, ARANGE, TIMESTEP_EMBEDDING.
    Misc,
}

impl Module {
    /// Every module.
    pub const ALL: [Module; 14] = [
        Module::Elementwise,
        Module::Copy,
        Module::GetRowsQuant,
        Module::Quantize,
        Module::MulMatQuant,
        Module::Reduce,
        Module::Norm,
        Module::Rope,
        Module::FlashAttn,
        Module::Experts,
        Module::Vision,
        Module::Ssm,
        Module::Conv,
        Module::Misc,
    ];

    /// A short name (file names of the disk cache, messages).
    pub const fn name(self) -> &'static str {
        match self {
            Module::Elementwise => "elementwise",
            Module::Copy => "copy",
            Module::GetRowsQuant => "get_rows_q",
            Module::Quantize => "quantize",
            Module::MulMatQuant => "mul_mat_q",
            Module::Reduce => "reduce",
            Module::Norm => "norm",
            Module::Rope => "rope",
            Module::FlashAttn => "flash_attn",
            Module::Experts => "experts",
            Module::Vision => "vision",
            Module::Ssm => "ssm",
            Module::Conv => "conv",
            Module::Misc => "misc",
        }
    }

    /// The `extern "C"` kernels the module defines.
    pub const fn entry_points(self) -> &'static [&'static str] {
        match self {
            Module::Elementwise => &["unary", "binary", "glu", "diag_mask_inf"],
            Module::Copy => &["cpy", "copy_block_rows", "concat", "repeat", "get_rows", "set_rows"],
            Module::GetRowsQuant => &["get_rows_q"],
            Module::Quantize => &["quantize_q8_1"],
            Module::MulMatQuant => &["mul_mat_vec_q", "mul_mat_q", "mul_mat_id_vec_q"],
            Module::Reduce => &["sum_all", "sum_rows", "argmax"],
            Module::Norm => &["norm_rows", "soft_max"],
            Module::Rope => &["rope"],
            Module::FlashAttn => &["flash_attn_vec"],
            Module::Experts => &["mul_mat_id_f", "add_id", "sort_rows", "cumsum"],
            Module::Vision => &["im2col", "pool_2d", "upscale", "pad", "group_norm"],
            Module::Ssm => &["ssm_conv", "ssm_scan"],
            Module::Conv => &["conv_2d", "conv_transpose", "pool_1d", "pad_reflect_1d", "roll"],
            Module::Misc => {
                &["fill", "tri", "diag", "copy_same", "set_view", "add1", "count_equal", "arange", "timestep_embedding"]
            }
        }
    }

    /// The parts of the module's source after the constants and the prelude.
    fn parts(self) -> &'static [&'static str] {
        match self {
            Module::Elementwise => &[ELEMENTWISE],
            Module::Copy => &[COPY],
            Module::GetRowsQuant => &[QUANT_BLOCKS, GET_ROWS_Q],
            Module::Quantize => &[QUANTIZE],
            Module::MulMatQuant => &[QUANT_BLOCKS, QUANTIZE, MUL_MAT_Q],
            Module::Reduce => &[REDUCE],
            Module::Norm => &[NORM],
            Module::Rope => &[ROPE],
            Module::FlashAttn => &[FLASH_ATTN],
            Module::Experts => &[EXPERTS],
            Module::Vision => &[VISION],
            Module::Ssm => &[SSM],
            Module::Conv => &[CONV],
            Module::Misc => &[MISC],
        }
    }

    /// The whole source NVRTC compiles.
    pub fn source(self) -> String {
        let mut src = constants();
        src.push_str(PRELUDE);
        for part in self.parts() {
            src.push('\n');
            src.push_str(part);
        }
        src
    }
}

/// A kernel: a module and one of its entry points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// The module defining it.
    pub module: Module,
    /// Its `extern "C"` name.
    pub name: &'static str,
}

impl Kernel {
    /// The kernel `name` of `module`.
    pub const fn new(module: Module, name: &'static str) -> Self {
        Self { module, name }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_point_is_defined_in_its_module() {
        for module in Module::ALL {
            let src = module.source();
            for name in module.entry_points() {
                let decl = format!("__global__ void {name}(const Args a)");
                assert!(src.contains(&decl), "{} does not define {name}", module.name());
            }
        }
    }

    #[test]
    fn sources_include_no_cuda_header() {
        for module in Module::ALL {
            assert!(!module.source().contains("#include"), "{} includes a header", module.name());
        }
    }
}
