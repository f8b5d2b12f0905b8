//! How big the GEMM's blocks are, from the CPU's caches: `kc` (steps of `k`
//! per block) so that a packed B panel (`kc x nr`) fills half of L1, `mc`
//! (rows per packed A block) so that the block (`mc x kc`) fills half of L2,
//! and `nc` (columns per packed B block) so that the block (`kc x nc`) fills
//! a quarter of L3.
//!
//! Half, because the other half holds what streams past: packed A's rows
//! through L1 on their way to the registers, B's panels and C's tiles
//! through L2. A quarter of L3, because every thread packs a B block of its
//! own and the L3 is shared.

use std::sync::OnceLock;

use super::{Kernels, Shape};
use crate::sysinfo::{CacheSizes, cache_sizes};

/// Bounds on `kc`: below 128 the tile's loads and stores of C cost more
/// than a percent; above 1024 nothing is gained.
const KC_RANGE: (usize, usize) = (128, 1024);
/// Bounds on `nc`, in panels: at least a few panels of B per block of A;
/// at most 8 MiB of packed B per thread (at kc = 512) whatever L3 says.
const NC_PANELS: (usize, usize) = (4, 512);

/// The block sizes of one product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Blocking {
    /// Steps of `k` per block (the last block may be shorter).
    pub kc: usize,
    /// Rows per packed A block, a multiple of `mr` (the last one may be shorter).
    pub mc: usize,
    /// Columns per packed B block, a multiple of `nr`.
    pub nc: usize,
}

/// The caches, read once.
fn caches() -> CacheSizes {
    static CACHES: OnceLock<CacheSizes> = OnceLock::new();
    *CACHES.get_or_init(cache_sizes)
}

impl Blocking {
    /// The blocks for `shape` on `kernels`, from this CPU's caches.
    pub fn new(kernels: &Kernels, shape: Shape) -> Blocking {
        Self::with_caches(kernels, shape, caches())
    }

    /// The blocks for `shape` on `kernels` with caches `caches`.
    pub fn with_caches(kernels: &Kernels, shape: Shape, caches: CacheSizes) -> Blocking {
        let (mr, nr) = (kernels.mr, kernels.nr);
        let f = size_of::<f32>();
        // kc: half of L1 for a packed B panel; the k blocks as even as can be.
        let kc_max = (caches.l1d / 2 / (nr * f)).clamp(KC_RANGE.0, KC_RANGE.1) / 8 * 8;
        let k = shape.k.max(1);
        let kc = k.div_ceil(k.div_ceil(kc_max));
        // mc: half of L2 for a packed A block of kc steps, whole panels.
        let mc = (caches.l2 / 2 / (kc * f) / mr).max(1) * mr;
        // nc: a quarter of L3 for a packed B block of kc steps, whole panels.
        let nc = (caches.l3 / 4 / (kc * f) / nr).clamp(NC_PANELS.0, NC_PANELS.1) * nr;
        Blocking { kc, mc, nc }
    }

    /// Floats of one packed B block of `n` columns at most (whole panels).
    pub fn packed_b_floats(&self, kernels: &Kernels, n: usize) -> usize {
        self.nc.min(n).div_ceil(kernels.nr) * kernels.nr * self.kc
    }

    /// Floats of one packed A block (whole panels).
    pub fn packed_a_floats(&self, kernels: &Kernels, m: usize) -> usize {
        self.mc.min(m).div_ceil(kernels.mr) * kernels.mr * self.kc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Isa;

    #[test]
    fn blocks_follow_the_caches() {
        let kernels = Kernels::of(Isa::Scalar);
        let (mr, nr) = (kernels.mr, kernels.nr);
        let zen4 = CacheSizes { l1d: 32 << 10, l2: 1 << 20, l3: 32 << 20 };
        let square = Shape { m: 2048, n: 2048, k: 2048 };
        let b = Blocking::with_caches(&kernels, square, zen4);
        // Half of L1 for kc x nr floats; k blocks even.
        assert!(b.kc * nr * 4 <= zen4.l1d / 2);
        assert_eq!(2048 % b.kc, 0);
        // Half of L2 for mc x kc, whole panels.
        assert!(b.mc * b.kc * 4 <= zen4.l2 / 2 && b.mc.is_multiple_of(mr));
        assert!((b.mc + mr) * b.kc * 4 > zen4.l2 / 2);
        // A quarter of L3 for kc x nc, whole panels.
        assert!(b.kc * b.nc * 4 <= zen4.l3 / 4 && (b.nc + nr) * b.kc * 4 > zen4.l3 / 4);
        assert!(b.nc.is_multiple_of(nr));
        assert_eq!(b.packed_b_floats(&kernels, 10), 12 * b.kc);
        // k just above a block is cut in two even halves.
        let odd = Blocking::with_caches(&kernels, Shape { k: b.kc + 2, ..square }, zen4);
        assert_eq!(odd.kc, (b.kc + 2).div_ceil(2));
        // Tiny caches still give a usable block.
        let tiny = Blocking::with_caches(&kernels, Shape { m: 5, n: 3, k: 1 }, CacheSizes { l1d: 0, l2: 0, l3: 0 });
        assert!(tiny.kc >= 1 && tiny.mc >= mr && tiny.nc >= nr);
    }
}
