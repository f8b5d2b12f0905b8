//! Caller memory that a buffer reads without owning it (an mmap'd file).

use std::ptr::NonNull;
use std::sync::Arc;

/// A region of host memory owned by someone else, kept alive by a shared
/// handle to its owner. A buffer made from it never frees or reallocates it.
///
/// ```
/// use std::sync::Arc;
/// use gantry_engine::HostMemory;
/// let bytes: Arc<Vec<u8>> = Arc::new(vec![1, 2, 3, 4]);
/// let mem = HostMemory::read_only(bytes);
/// assert_eq!(mem.len(), 4);
/// assert!(!mem.is_writable());
/// ```
#[derive(Clone)]
pub struct HostMemory {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
    _owner: Arc<dyn Send + Sync>,
}

// SAFETY: the memory is kept alive by `_owner`, which is Send + Sync; access
// to the bytes goes through buffers that check bounds and writability.
unsafe impl Send for HostMemory {}
// SAFETY: as above.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// Read-only memory from an owner that derefs to bytes (`memmap2::Mmap`, `Vec<u8>`).
    pub fn read_only<T: AsRef<[u8]> + Send + Sync + 'static>(owner: Arc<T>) -> Self {
        let bytes = (*owner).as_ref();
        let ptr = NonNull::new(bytes.as_ptr() as *mut u8).unwrap_or(NonNull::dangling());
        Self { ptr, len: bytes.len(), writable: false, _owner: owner }
    }

    /// Writable memory.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be valid for reads and writes for as long as
    /// `owner` lives, and nothing else may access it while a buffer over it
    /// is in use.
    pub unsafe fn from_raw_parts(ptr: NonNull<u8>, len: usize, owner: Arc<dyn Send + Sync>) -> Self {
        Self { ptr, len, writable: true, _owner: owner }
    }

    /// Start of the region.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether buffers over this memory may write it.
    pub fn is_writable(&self) -> bool {
        self.writable
    }
}

impl std::fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostMemory").field("len", &self.len).field("writable", &self.writable).finish()
    }
}
