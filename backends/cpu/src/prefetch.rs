//! Software prefetch into L2, for kernels that stream memory the hardware
//! prefetcher does not reach in time: the repacked products' weights (far
//! ahead of the block being multiplied) and the attention's K/V rows (a
//! block at once, before it is read in place).

/// Asks for the cache lines of the `bytes` bytes at `p` that lie below
/// `end` to be brought into L2 (`_MM_HINT_T1`). A no-op off x86-64.
///
/// A prefetch never faults, whatever the address; `end` only keeps the
/// requests to memory somebody will read.
#[inline(always)]
pub(crate) fn prefetch_l2(p: *const u8, bytes: usize, end: *const u8) {
    let bytes = bytes.min((end as usize).saturating_sub(p as usize));
    #[cfg(target_arch = "x86_64")]
    for line in (0..bytes).step_by(64) {
        // SAFETY: a prefetch reads nothing and never faults.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p.wrapping_add(line).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
