//! Zeroed, 64-byte aligned heap memory: the storage of CPU buffers and of
//! the backend's scratch.
//!
//! Large blocks (on Linux) are mapped anonymously on 2 MiB boundaries and
//! marked for transparent huge pages: streaming a weight matrix through
//! 4 KiB pages costs a TLB miss every 4 KiB (a nested page walk in a virtual
//! machine), which measured here as nearly half the read bandwidth of a
//! 33 MB matrix (9.3 against 16.5 GB/s on one core).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

use gantry_engine::{Error, Result};

/// Alignment of every CPU allocation: the engine's host alignment (a cache
/// line, and enough for any SIMD load).
pub const CPU_ALIGNMENT: usize = gantry_engine::HOST_ALIGNMENT;

/// A zero-sized type with the CPU alignment, so that an empty allocation
/// still has a well-aligned (dangling) address.
#[repr(align(64))]
struct CacheLine;

/// An owned, zero-initialized block of `len` bytes aligned to [`CPU_ALIGNMENT`].
/// Zeroing keeps every byte initialized, so reading a tensor that was never
/// written is defined (it reads zeros).
pub struct AlignedBytes {
    ptr: NonNull<u8>,
    len: usize,
    /// The mapping `ptr` points into, for large blocks; `None` for heap blocks.
    #[cfg(target_os = "linux")]
    mapping: Option<memmap2::MmapMut>,
}

/// Blocks from this size are mapped with huge pages (Linux).
#[cfg(target_os = "linux")]
const HUGE_PAGE_MIN: usize = 4 << 20;
/// The huge page size of x86-64 and most aarch64 kernels.
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

// SAFETY: the block is uniquely owned plain memory; `AlignedBytes` hands out
// only raw pointers and the users synchronize access (as ggml's buffers do).
unsafe impl Send for AlignedBytes {}
// SAFETY: as above; shared access only yields the base pointer and length.
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    /// Allocates `len` zeroed bytes; `what` names the allocation in the error.
    pub fn zeroed(len: usize, what: &str) -> Result<Self> {
        let oom = || Error::OutOfMemory { buffer_type: what.to_owned(), size: len };
        if len == 0 {
            return Ok(Self::from_heap(NonNull::<CacheLine>::dangling().cast(), 0));
        }
        #[cfg(target_os = "linux")]
        if len >= HUGE_PAGE_MIN {
            return Self::mapped(len).ok_or_else(oom);
        }
        let layout = Layout::from_size_align(len, CPU_ALIGNMENT).map_err(|_| oom())?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        NonNull::new(ptr).map(|ptr| Self::from_heap(ptr, len)).ok_or_else(oom)
    }

    fn from_heap(ptr: NonNull<u8>, len: usize) -> Self {
        Self {
            ptr,
            len,
            #[cfg(target_os = "linux")]
            mapping: None,
        }
    }

    /// `len` zeroed bytes of an anonymous mapping, starting on a huge page
    /// boundary and advised to use huge pages before any page is touched (a
    /// refused advice leaves ordinary pages, still correct).
    #[cfg(target_os = "linux")]
    fn mapped(len: usize) -> Option<Self> {
        let mut map = memmap2::MmapOptions::new().len(len.checked_add(HUGE_PAGE)?).map_anon().ok()?;
        let offset = map.as_ptr().align_offset(HUGE_PAGE).min(HUGE_PAGE);
        let _ = map.advise_range(memmap2::Advice::HugePage, offset, len);
        // SAFETY: `offset + len` is within the mapping of `len + HUGE_PAGE` bytes.
        let ptr = unsafe { map.as_mut_ptr().add(offset) };
        Some(Self { ptr: NonNull::new(ptr)?, len, mapping: Some(map) })
    }

    /// The first byte.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the block is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes, for their one owner to read and write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `len` zeroed (so initialized) bytes from `ptr`, owned by
        // `self`, which `&mut self` borrows whole.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if self.mapping.is_some() {
            // The mapping unmaps itself.
            return;
        }
        if self.len != 0 {
            // SAFETY: allocated in `zeroed` with exactly this layout, freed once.
            unsafe { dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.len, CPU_ALIGNMENT)) }
        }
    }
}

impl std::fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBytes").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_empty() {
        for len in [0, 1, 63, 64, 1000, 5 << 20, (8 << 20) + 3] {
            let b = AlignedBytes::zeroed(len, "test").unwrap();
            assert_eq!(b.as_ptr() as usize % CPU_ALIGNMENT, 0, "len {len}");
            assert_eq!(b.len(), len);
            // SAFETY: `len` initialized bytes at the pointer.
            let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), len) };
            assert!(bytes.iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn impossible_sizes_are_errors() {
        let err = AlignedBytes::zeroed(usize::MAX - 8, "CPU").unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    }
}
