//! What a graph becomes on a CUDA stream: a list of [`Launch`]es (kernels
//! with their parameter block, cuBLAS products, device copies), planned
//! first and then run directly or captured into a CUDA graph. Two plans
//! that compare equal do exactly the same work, which is what makes
//! replaying a captured graph correct.

use bytemuck::{Pod, Zeroable};

use super::kernels::{ARGS_BYTES, Kernel};

/// A tensor as the kernels see it (`struct Tensor` in `prelude.cuh`).
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct TensorArg {
    /// Device address of element `[0, 0, 0, 0]`.
    pub data: u64,
    /// Elements per dimension.
    pub ne: [i64; 4],
    /// Byte strides.
    pub nb: [i64; 4],
    /// ggml's dtype id.
    pub dtype: i32,
    /// Padding to 8 bytes.
    pub pad: i32,
}

/// The single parameter of every kernel (`struct Args` in `prelude.cuh`).
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Args {
    /// The result.
    pub dst: TensorArg,
    /// The sources (SSM_SCAN reads seven).
    pub src: [TensorArg; 8],
    /// Float parameters.
    pub f: [f32; 8],
    /// Integer parameters.
    pub i: [i64; 8],
    /// Device address of the backend's error word.
    pub err: u64,
}

const _: () = assert!(size_of::<TensorArg>() == super::kernels::constants::TENSOR_BYTES);
const _: () = assert!(size_of::<Args>() == ARGS_BYTES);

impl PartialEq for Args {
    /// Bit for bit (a NaN parameter equals itself): a plan is the same work
    /// exactly when its bytes are.
    fn eq(&self, other: &Self) -> bool {
        bytemuck::bytes_of(self) == bytemuck::bytes_of(other)
    }
}

/// One kernel launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelLaunch {
    /// Which kernel.
    pub kernel: Kernel,
    /// Blocks.
    pub grid: [u32; 3],
    /// Threads per block.
    pub block: [u32; 3],
    /// Dynamic shared memory in bytes.
    pub shared: u32,
    /// The parameter block.
    pub args: Args,
}

/// The element type of a cuBLAS operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmType {
    /// `CUDA_R_32F`.
    F32,
    /// `CUDA_R_16F`.
    F16,
    /// `CUDA_R_16BF`.
    BF16,
}

/// `C[b] = A[b]^T B[b]` for `batch` batches (`cublasGemmStridedBatchedEx`,
/// column-major): A is `k x m` (lda), B `k x n` (ldb), C `m x n` (ldc) F32;
/// strides in elements between batches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmLaunch {
    /// Type of A and B.
    pub ab_type: GemmType,
    /// Rows of the result.
    pub m: i32,
    /// Columns of the result.
    pub n: i32,
    /// The shared dimension.
    pub k: i32,
    /// A's address, leading dimension and batch stride.
    pub a: (u64, i32, i64),
    /// B's address, leading dimension and batch stride.
    pub b: (u64, i32, i64),
    /// C's address, leading dimension and batch stride.
    pub c: (u64, i32, i64),
    /// Batches.
    pub batch: i32,
}

/// One step of a plan.
#[derive(Debug, Clone, Copy, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "plans are reused Vecs of launches, mostly kernels: boxing the kernel's parameters would allocate per launch on every compute"
)]
pub enum Launch {
    /// A kernel.
    Kernel(KernelLaunch),
    /// A cuBLAS product.
    Gemm(GemmLaunch),
    /// `bytes` bytes from `src` to `dst`, both device memory.
    CopyBytes {
        /// Destination address.
        dst: u64,
        /// Source address.
        src: u64,
        /// Length.
        bytes: u64,
    },
}

/// Addresses in the backend's scratch memory are planned before it is
/// allocated: they carry this bit and their offset, and are rewritten to
/// the real address once the plan's scratch size is known. No device
/// address has it (user-space addresses stay below 2^57).
pub const SCRATCH_TAG: u64 = 1 << 63;

/// Rewrites scratch-tagged addresses to `base + offset`.
pub fn resolve_scratch(launches: &mut [Launch], base: u64) {
    let fix = |a: &mut u64| {
        if *a & SCRATCH_TAG != 0 {
            *a = base + (*a & !SCRATCH_TAG);
        }
    };
    for launch in launches {
        match launch {
            Launch::Kernel(k) => {
                fix(&mut k.args.dst.data);
                k.args.src.iter_mut().for_each(|s| fix(&mut s.data));
            }
            Launch::Gemm(g) => {
                fix(&mut g.a.0);
                fix(&mut g.b.0);
                fix(&mut g.c.0);
            }
            Launch::CopyBytes { dst, src, .. } => {
                fix(dst);
                fix(src);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Module;

    #[test]
    fn scratch_addresses_are_resolved_and_others_kept() {
        let mut args = Args::zeroed();
        args.dst.data = 0x7000_0000;
        args.src[1].data = SCRATCH_TAG | 256;
        let k = KernelLaunch { kernel: Kernel::new(Module::Copy, "cpy"), grid: [1; 3], block: [1; 3], shared: 0, args };
        let mut plan = [Launch::Kernel(k), Launch::CopyBytes { dst: SCRATCH_TAG, src: 0x10, bytes: 4 }];
        resolve_scratch(&mut plan, 0x9000);
        let Launch::Kernel(k) = plan[0] else { unreachable!() };
        assert_eq!((k.args.dst.data, k.args.src[1].data), (0x7000_0000, 0x9100));
        assert_eq!(plan[1], Launch::CopyBytes { dst: 0x9000, src: 0x10, bytes: 4 });
    }

    #[test]
    fn plans_compare_bit_for_bit() {
        let mut a = Args::zeroed();
        a.f[0] = f32::NAN;
        let b = a;
        assert_eq!(a, b, "a NaN parameter is the same parameter");
        let mut c = a;
        c.i[3] = 1;
        assert_ne!(a, c);
    }
}
