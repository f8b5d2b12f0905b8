//! Zeroed, 64-byte aligned heap memory: the storage of CPU buffers and of
//! the backend's scratch.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

use gantry_engine::{Error, Result};

/// Alignment of every CPU allocation: a cache line, and enough for any SIMD load.
pub const CPU_ALIGNMENT: usize = 64;

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
}

// SAFETY: the block is uniquely owned plain memory; `AlignedBytes` hands out
// only raw pointers and the users synchronize access (as ggml's buffers do).
unsafe impl Send for AlignedBytes {}
// SAFETY: as above; shared access only yields the base pointer and length.
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    /// Allocates `len` zeroed bytes; `what` names the allocation in the error.
    pub fn zeroed(len: usize, what: &str) -> Result<Self> {
        if len == 0 {
            return Ok(Self { ptr: NonNull::<CacheLine>::dangling().cast(), len: 0 });
        }
        let oom = || Error::OutOfMemory { buffer_type: what.to_owned(), size: len };
        let layout = Layout::from_size_align(len, CPU_ALIGNMENT).map_err(|_| oom())?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        NonNull::new(ptr).map(|ptr| Self { ptr, len }).ok_or_else(oom)
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
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
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
        for len in [0, 1, 63, 64, 1000] {
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
