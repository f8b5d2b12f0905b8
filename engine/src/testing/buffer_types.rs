//! Buffer types for tests and benches: plain host memory with any alignment
//! and maximum size, and "virtual" buffers that have a size but no memory
//! (for planning graphs whose weights would not fit in a test's budget).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Buffer, BufferType, Error, Result, check_range};

/// Host memory with a chosen alignment and maximum buffer size; counts the
/// buffers it allocates.
#[derive(Debug)]
pub struct HostBufferType {
    name: String,
    alignment: usize,
    max_size: usize,
    allocated: AtomicUsize,
}

impl HostBufferType {
    /// Buffers aligned to `alignment` (a power of two), of any size.
    pub fn new(name: &str, alignment: usize) -> Self {
        Self::with_max_size(name, alignment, usize::MAX)
    }

    /// Buffers aligned to `alignment` and at most `max_size` bytes each.
    pub fn with_max_size(name: &str, alignment: usize, max_size: usize) -> Self {
        Self { name: name.to_owned(), alignment: alignment.max(1), max_size, allocated: AtomicUsize::new(0) }
    }

    /// Number of buffers allocated so far.
    pub fn buffers_allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }
}

impl BufferType for HostBufferType {
    fn name(&self) -> &str {
        &self.name
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        if size > self.max_size {
            return Err(Error::OutOfMemory { buffer_type: self.name.clone(), size });
        }
        let layout = Layout::from_size_align(size.max(1), self.alignment)
            .map_err(|_| Error::OutOfMemory { buffer_type: self.name.clone(), size })?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| Error::OutOfMemory { buffer_type: self.name.clone(), size })?;
        self.allocated.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(HostBuffer { ptr, size, layout, name: self.name.clone() }))
    }

    fn alignment(&self) -> usize {
        self.alignment
    }

    fn max_size(&self) -> usize {
        self.max_size
    }

    fn is_host(&self) -> bool {
        true
    }

    fn device_name(&self) -> &str {
        "test host"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A block of zeroed host memory.
struct HostBuffer {
    ptr: NonNull<u8>,
    size: usize,
    layout: Layout,
    name: String,
}

// SAFETY: the buffer owns its memory; every access goes through bounds-checked
// methods, and concurrent writers to one range are the caller's to order (as
// for any device buffer).
unsafe impl Send for HostBuffer {}
// SAFETY: as above.
unsafe impl Sync for HostBuffer {}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc_buffer` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl Buffer for HostBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.ptr.as_ptr())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_range(&self.name, self.size, offset, data.len())?;
        // SAFETY: the range was checked to lie inside the allocation; `data`
        // is a separate borrow, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len()) }
        Ok(())
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range(&self.name, self.size, offset, out.len())?;
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), out.len()) }
        Ok(())
    }

    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        check_range(&self.name, self.size, offset, len)?;
        // SAFETY: the range was checked to lie inside the allocation.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(offset), value, len) }
        Ok(())
    }

    fn copy_from(&self, dst_offset: usize, src: &dyn Buffer, src_offset: usize, len: usize) -> Result<bool> {
        let Some(base) = src.host_ptr() else { return Ok(false) };
        check_range(&self.name, self.size, dst_offset, len)?;
        check_range("source", src.size(), src_offset, len)?;
        // SAFETY: both ranges were checked against their buffers; `copy` allows overlap.
        unsafe { std::ptr::copy(base.add(src_offset), self.ptr.as_ptr().add(dst_offset), len) }
        Ok(true)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Buffers with a size and no memory: tensors can be placed in them (for
/// planning and binding), never read or written.
#[derive(Debug)]
pub struct VirtualBufferType {
    name: String,
    alignment: usize,
    max_size: usize,
}

impl VirtualBufferType {
    /// Virtual buffers aligned to `alignment`, of any size.
    pub fn new(name: &str, alignment: usize) -> Self {
        Self::with_max_size(name, alignment, usize::MAX)
    }

    /// Virtual buffers aligned to `alignment`, at most `max_size` bytes each.
    pub fn with_max_size(name: &str, alignment: usize, max_size: usize) -> Self {
        Self { name: name.to_owned(), alignment: alignment.max(1), max_size }
    }
}

impl BufferType for VirtualBufferType {
    fn name(&self) -> &str {
        &self.name
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        if size > self.max_size {
            return Err(Error::OutOfMemory { buffer_type: self.name.clone(), size });
        }
        Ok(Box::new(VirtualBuffer { size, name: self.name.clone() }))
    }

    fn alignment(&self) -> usize {
        self.alignment
    }

    fn max_size(&self) -> usize {
        self.max_size
    }

    fn is_host(&self) -> bool {
        false
    }

    fn device_name(&self) -> &str {
        "virtual"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct VirtualBuffer {
    size: usize,
    name: String,
}

impl VirtualBuffer {
    fn no_memory(&self) -> Error {
        Error::Unsupported(format!("{} buffers have no memory", self.name))
    }
}

impl Buffer for VirtualBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        None
    }

    fn write(&self, _offset: usize, _data: &[u8]) -> Result<()> {
        Err(self.no_memory())
    }

    fn read(&self, _offset: usize, _out: &mut [u8]) -> Result<()> {
        Err(self.no_memory())
    }

    fn fill(&self, _offset: usize, _len: usize, _value: u8) -> Result<()> {
        Err(self.no_memory())
    }

    fn copy_from(&self, _dst_offset: usize, _src: &dyn Buffer, _src_offset: usize, _len: usize) -> Result<bool> {
        Err(self.no_memory())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_buffers_are_aligned_zeroed_and_checked() {
        let bt = HostBufferType::new("h", 256);
        let b = bt.alloc_buffer(1000).unwrap();
        let p = b.host_ptr().unwrap();
        assert_eq!(p as usize % 256, 0);
        let mut out = [1u8; 4];
        b.read(996, &mut out).unwrap();
        assert_eq!(out, [0; 4]);
        b.write(10, &[7, 8]).unwrap();
        b.read(10, &mut out[..2]).unwrap();
        assert_eq!(&out[..2], &[7, 8]);
        assert!(b.write(999, &[1, 2]).is_err());
        assert_eq!(bt.buffers_allocated(), 1);
        assert!(bt.alloc_buffer(0).unwrap().size() == 0);
    }

    #[test]
    fn max_size_is_enforced() {
        let bt = HostBufferType::with_max_size("h", 16, 100);
        assert!(matches!(bt.alloc_buffer(101), Err(Error::OutOfMemory { .. })));
        let v = VirtualBufferType::with_max_size("v", 16, 100);
        assert!(v.alloc_buffer(100).is_ok());
        assert!(v.alloc_buffer(101).is_err());
        assert!(v.alloc_buffer(10).unwrap().write(0, &[1]).is_err());
    }
}
