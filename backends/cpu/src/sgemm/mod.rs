//! Gantry's own F32 GEMM: the CPU backend's MUL_MAT for F32, F16 and BF16
//! weights times F32 activations once there are more than a few columns.
//!
//! It is built the way BLIS and OpenBLAS build theirs (Goto's algorithm):
//!
//! - **Packing.** B (the activations, `k x n`) is copied one block of `kc`
//!   steps by `nc` columns at a time into panels of `nr` columns, `nr`
//!   values per step; A (the weights, `m x k`) one block of `mc` rows by
//!   `kc` steps at a time into panels of `mr` rows, `mr` values per step.
//!   F16 and BF16 weights are widened to F32 while packing (exactly), so
//!   the arithmetic is F32 throughout. Both operands come in with `k`
//!   contiguous (ggml's layout), so packing transposes: by 16 x 16
//!   (AVX-512) or 8 x 8 (AVX2) register transposes.
//! - **Micro-kernel.** An `mr x nr` tile of C lives in registers while `kc`
//!   steps stream through it: per step, `mr / w` vector loads of packed A,
//!   `nr` broadcasts of packed B, `mr / w * nr` FMAs (`w` floats per
//!   vector). AVX-512: 48 x 8 (24 accumulators of the 32 zmm registers);
//!   AVX2: 16 x 6 (12 of the 16 ymm registers); portable: 8 x 4.
//! - **Blocking** (see [`blocking`]): a packed B panel (`kc x nr`) stays in
//!   L1 while the micro-kernel sweeps a packed A block (`mc x kc`) held in
//!   L2; the packed B block (`kc x nc`) waits in L3.
//! - **Threads** (see [`driver`]): C is cut into one block per task of the
//!   job system, bands of rows or of columns or both, whichever packs the
//!   least, and each task packs the parts of A and B it reads into its
//!   per-thread scratch: nothing packed crosses between cores' caches.
//!
//! The layouts are ggml's: A is `m` rows of `k` values, B is `n` columns of
//! `k` values, C is `n` columns of `m` values; each with its own strides
//! (permuted views), see [`Lhs`], [`Rhs`], [`Out`].

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod blocking;
mod driver;
mod portable;
#[cfg(target_arch = "x86_64")]
mod transpose;

#[cfg(test)]
mod tests;

use std::ops::Range;

pub(crate) use driver::{sgemm, sgemm_one_thread, sgemm_one_thread_floats};

use crate::Isa;

/// The element type of the left operand (the weights).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LhsType {
    /// `f32`.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
}

impl LhsType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            LhsType::F32 => 4,
            LhsType::F16 | LhsType::BF16 => 2,
        }
    }
}

/// The left operand A, `m x k`: element `(i, p)` at `ptr + i * row_stride
/// + p * elem_stride` bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lhs {
    /// Element `(0, 0)`.
    pub ptr: *const u8,
    /// The element type.
    pub dtype: LhsType,
    /// Bytes between rows.
    pub row_stride: usize,
    /// Bytes between the elements of a row (`dtype.size()` when dense).
    pub elem_stride: usize,
}

impl Lhs {
    /// Whether the elements of a row are adjacent (the packers' fast path).
    fn dense(&self) -> bool {
        self.elem_stride == self.dtype.size()
    }

    /// Element `(i, p)` as f32 (the packers' general path).
    ///
    /// # Safety
    /// `(i, p)` lies inside A.
    #[inline]
    unsafe fn get(&self, i: usize, p: usize) -> f32 {
        // SAFETY: the caller's guarantee; element alignment was checked when A was bound.
        unsafe {
            let e = self.ptr.add(i * self.row_stride + p * self.elem_stride);
            match self.dtype {
                LhsType::F32 => *(e as *const f32),
                LhsType::F16 => (*(e as *const half::f16)).to_f32(),
                LhsType::BF16 => (*(e as *const half::bf16)).to_f32(),
            }
        }
    }
}

/// The right operand B, `k x n`, F32: element `(p, j)` at `ptr + j *
/// col_stride + p * elem_stride` bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rhs {
    /// Element `(0, 0)`.
    pub ptr: *const u8,
    /// Bytes between columns.
    pub col_stride: usize,
    /// Bytes between the elements of a column (4 when dense).
    pub elem_stride: usize,
}

impl Rhs {
    /// Whether the elements of a column are adjacent (the packers' fast path).
    fn dense(&self) -> bool {
        self.elem_stride == size_of::<f32>()
    }

    /// Column `j` from its element `p`.
    ///
    /// # Safety
    /// `(p, j)` lies inside B.
    #[inline]
    unsafe fn at(&self, p: usize, j: usize) -> *const f32 {
        // SAFETY: the caller's guarantee.
        unsafe { self.ptr.add(j * self.col_stride + p * self.elem_stride) as *const f32 }
    }
}

/// The result C, `m x n`, F32: element `(i, j)` at `ptr + j * col_stride +
/// i` floats (the elements of a column are adjacent, as ggml's results).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Out {
    /// Element `(0, 0)`.
    pub ptr: *mut f32,
    /// Floats between columns.
    pub col_stride: usize,
}

// SAFETY: A and B are only read, by every task of one product; C's
// elements are written by one task each (the driver splits C into
// disjoint bands), and all tasks end before the product returns.
unsafe impl Sync for Lhs {}
// SAFETY: as above.
unsafe impl Sync for Rhs {}
// SAFETY: as above.
unsafe impl Sync for Out {}

/// The sizes of one product: C (`m x n`) = A (`m x k`) · B (`k x n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
}

/// One block of the micro-kernel's loop (the "macro-kernel"): C's `rows x
/// cols` block at `c` is set to (or, with `accumulate`, added to) packed A
/// (`rows` rows in panels of `mr`) times packed B (`cols` columns in panels
/// of `nr`), over `kc` steps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block {
    /// Steps of `k` in this block.
    pub kc: usize,
    /// Packed A: `rows.div_ceil(mr)` panels of `kc x mr` floats.
    pub a: *const f32,
    /// Rows of C.
    pub rows: usize,
    /// Packed B: `cols.div_ceil(nr)` panels of `kc x nr` floats.
    pub b: *const f32,
    /// Columns of C.
    pub cols: usize,
    /// C's element `(0, 0)` of this block.
    pub c: *mut f32,
    /// Floats between C's columns.
    pub ldc: usize,
    /// Add to C instead of overwriting it (every `k` block but the first).
    pub accumulate: bool,
}

/// One instruction-set path: its tile size and its three loops.
#[derive(Clone, Copy)]
pub(crate) struct Kernels {
    /// Rows of a micro-tile (packed A panels are this tall).
    pub mr: usize,
    /// Columns of a micro-tile (packed B panels are this wide).
    pub nr: usize,
    /// Packs A's `rows x ks` into `rows.len().div_ceil(mr)` panels of
    /// `ks.len() x mr` floats (rows past the end zero) at `out` (64-byte
    /// aligned).
    pub pack_a: unsafe fn(a: &Lhs, rows: Range<usize>, ks: Range<usize>, out: *mut f32),
    /// Packs B's `ks x cols` into `cols.len().div_ceil(nr)` panels of
    /// `ks.len() x nr` floats (columns past the end zero) at `out`.
    pub pack_b: unsafe fn(b: &Rhs, cols: Range<usize>, ks: Range<usize>, out: *mut f32),
    /// Computes one [`Block`].
    pub block: unsafe fn(&Block),
}

impl Kernels {
    /// The kernels of instruction-set path `isa`.
    pub fn of(isa: Isa) -> Kernels {
        match isa {
            Isa::Scalar => portable::KERNELS,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => avx2::KERNELS,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni => avx512::KERNELS,
        }
    }
}
