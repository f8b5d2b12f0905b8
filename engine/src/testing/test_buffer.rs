//! The one buffer type of the workspace's tests and benches: host memory,
//! device-like memory, or a size with no memory at all, with any alignment,
//! maximum size and writability.

use std::alloc::{Layout, alloc, dealloc};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Buffer, BufferType, Error, HostMemory, Result, check_range};

/// What a test buffer's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Memory {
    /// Host memory, reachable through `host_ptr`, and host memory to anyone asking.
    Host,
    /// Memory a device owns: not host memory to anyone asking. With
    /// `host_ptr` the bytes are still reachable (the test GPU computes on
    /// them with the CPU kernels); without, every access is a read, write or
    /// staged copy, as for a real device.
    Device { host_ptr: bool },
    /// A size and no bytes: tensors can be placed (for planning graphs whose
    /// weights would not fit in a test's budget), never read or written
    /// (clearing the whole buffer succeeds: there is nothing to clear).
    Virtual,
}

/// A configurable buffer type for tests and benches.
///
/// ```
/// use gantry_engine::BufferType;
/// use gantry_engine::testing::TestBufferType;
/// let host = TestBufferType::host("host", 32);
/// let b = host.alloc_buffer(100)?;
/// assert!(host.is_host() && b.host_ptr().is_some());
/// let vram = TestBufferType::device("vram", 256).with_max_size(1 << 20);
/// assert!(!vram.is_host() && vram.alloc_buffer(2 << 20).is_err());
/// let planned = TestBufferType::virtual_memory("planned", 256);
/// assert!(planned.alloc_buffer(1 << 40)?.write(0, &[1]).is_err(), "no bytes behind it");
/// # Ok::<(), gantry_engine::Error>(())
/// ```
#[derive(Debug)]
pub struct TestBufferType {
    name: String,
    alignment: usize,
    max_size: usize,
    memory: Memory,
    writable: bool,
    fill: u8,
    allocated: AtomicUsize,
    hooks: Arc<HookCalls>,
}

/// How often the per-tensor hooks of a test type's buffers were called.
#[derive(Debug, Default)]
struct HookCalls {
    init_tensor: AtomicUsize,
    reset: AtomicUsize,
}

impl TestBufferType {
    fn new(name: &str, alignment: usize, memory: Memory) -> Self {
        Self {
            name: name.to_owned(),
            alignment: alignment.max(1).next_power_of_two(),
            max_size: usize::MAX,
            memory,
            writable: true,
            fill: 0,
            allocated: AtomicUsize::new(0),
            hooks: Arc::default(),
        }
    }

    /// Host memory aligned to `alignment`.
    pub fn host(name: &str, alignment: usize) -> Self {
        Self::new(name, alignment, Memory::Host)
    }

    /// Device-like memory aligned to `alignment`: not host memory, and no
    /// host pointer (reads, writes and copies go through the buffer's methods).
    pub fn device(name: &str, alignment: usize) -> Self {
        Self::new(name, alignment, Memory::Device { host_ptr: false })
    }

    /// Buffers with a size and no memory, aligned to `alignment`.
    pub fn virtual_memory(name: &str, alignment: usize) -> Self {
        Self::new(name, alignment, Memory::Virtual)
    }

    /// Buffers of at most `max_size` bytes.
    pub fn with_max_size(mut self, max_size: usize) -> Self {
        self.max_size = max_size;
        self
    }

    /// Device memory whose bytes the host can still reach (`host_ptr`), as
    /// the CPU kernels need when a test device computes with them.
    pub fn with_host_ptr(mut self) -> Self {
        if let Memory::Device { host_ptr } = &mut self.memory {
            *host_ptr = true;
        }
        self
    }

    /// Buffers that refuse every write (like a buffer over a read-only file
    /// mapping).
    pub fn read_only(mut self) -> Self {
        self.writable = false;
        self
    }

    /// New buffers start filled with `byte` instead of zeros (to catch bytes
    /// nobody wrote).
    pub fn filled_with(mut self, byte: u8) -> Self {
        self.fill = byte;
        self
    }

    /// As a shared trait object.
    pub fn shared(self) -> Arc<dyn BufferType> {
        Arc::new(self)
    }

    /// Calls of [`Buffer::init_tensor`] on this type's buffers so far.
    pub fn init_tensor_calls(&self) -> usize {
        self.hooks.init_tensor.load(Ordering::Relaxed)
    }

    /// Calls of [`Buffer::reset`] on this type's buffers so far.
    pub fn reset_calls(&self) -> usize {
        self.hooks.reset.load(Ordering::Relaxed)
    }

    /// Number of buffers allocated so far.
    pub fn buffers_allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }

    /// A read-only buffer over `memory` (caller memory: a mapped file).
    pub fn buffer_over(&self, memory: HostMemory) -> Box<dyn Buffer> {
        let size = memory.len();
        Box::new(TestBuffer {
            name: self.name.clone(),
            size,
            bytes: Bytes::Borrowed(memory),
            host_ptr: true,
            writable: false,
            hooks: self.hooks.clone(),
        })
    }
}

impl BufferType for TestBufferType {
    fn name(&self) -> &str {
        &self.name
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        let oom = || Error::OutOfMemory { buffer_type: self.name.clone(), size };
        if size > self.max_size {
            return Err(oom());
        }
        let bytes = match self.memory {
            Memory::Virtual => Bytes::None,
            Memory::Host | Memory::Device { .. } => {
                let layout = Layout::from_size_align(size.max(1), self.alignment).map_err(|_| oom())?;
                // SAFETY: the layout has a non-zero size.
                let ptr = NonNull::new(unsafe { alloc(layout) }).ok_or_else(oom)?;
                // SAFETY: `ptr` points to `layout.size()` freshly allocated bytes.
                unsafe { std::ptr::write_bytes(ptr.as_ptr(), self.fill, layout.size()) };
                Bytes::Owned { ptr, layout }
            }
        };
        self.allocated.fetch_add(1, Ordering::Relaxed);
        let host_ptr = matches!(self.memory, Memory::Host | Memory::Device { host_ptr: true });
        Ok(Box::new(TestBuffer {
            name: self.name.clone(),
            size,
            bytes,
            host_ptr,
            writable: self.writable,
            hooks: self.hooks.clone(),
        }))
    }

    fn alignment(&self) -> usize {
        self.alignment
    }

    fn max_size(&self) -> usize {
        self.max_size
    }

    fn is_host(&self) -> bool {
        self.memory == Memory::Host
    }

    fn device(&self) -> Option<Arc<dyn crate::Device>> {
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Where a test buffer's bytes live.
enum Bytes {
    /// Allocated by the buffer type, freed on drop.
    Owned { ptr: NonNull<u8>, layout: Layout },
    /// Caller memory, kept alive by the handle.
    Borrowed(HostMemory),
    /// No bytes (a virtual buffer).
    None,
}

/// A buffer of [`TestBufferType`].
struct TestBuffer {
    name: String,
    size: usize,
    bytes: Bytes,
    host_ptr: bool,
    writable: bool,
    hooks: Arc<HookCalls>,
}

// SAFETY: the buffer owns (or keeps alive) its memory; every access goes
// through bounds-checked methods, and concurrent writers to one range are
// the caller's to order (as for any device buffer).
unsafe impl Send for TestBuffer {}
// SAFETY: as above.
unsafe impl Sync for TestBuffer {}

impl Drop for TestBuffer {
    fn drop(&mut self) {
        if let Bytes::Owned { ptr, layout } = self.bytes {
            // SAFETY: allocated in `alloc_buffer` with this layout, freed once.
            unsafe { dealloc(ptr.as_ptr(), layout) }
        }
    }
}

impl TestBuffer {
    /// The first byte, or an error for a virtual buffer.
    fn base(&self) -> Result<*mut u8> {
        match &self.bytes {
            Bytes::Owned { ptr, .. } => Ok(ptr.as_ptr()),
            Bytes::Borrowed(memory) => Ok(memory.as_ptr()),
            Bytes::None => Err(Error::Unsupported(format!("{} buffers have no memory", self.name))),
        }
    }

    /// The first byte for a write: an error for read-only or virtual memory.
    fn base_for_write(&self) -> Result<*mut u8> {
        if !self.writable {
            return Err(Error::Unsupported(format!("{} buffers are read-only", self.name)));
        }
        self.base()
    }
}

impl Buffer for TestBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn init_tensor(&self, _tensor: crate::TensorId, layout: &crate::TensorLayout, offset: usize) -> Result<()> {
        self.hooks.init_tensor.fetch_add(1, Ordering::Relaxed);
        check_range(&self.name, self.size, offset, layout.nbytes())
    }

    fn reset(&self) {
        self.hooks.reset.fetch_add(1, Ordering::Relaxed);
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        if self.host_ptr { self.base().ok() } else { None }
    }

    fn is_writable(&self) -> bool {
        self.writable
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let base = self.base_for_write()?;
        check_range(&self.name, self.size, offset, data.len())?;
        // SAFETY: the range was checked to lie inside the memory; `data` is a
        // separate borrow, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(offset), data.len()) }
        Ok(())
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let base = self.base()?;
        check_range(&self.name, self.size, offset, out.len())?;
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(base.add(offset), out.as_mut_ptr(), out.len()) }
        Ok(())
    }

    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        let base = self.base_for_write()?;
        check_range(&self.name, self.size, offset, len)?;
        // SAFETY: the range was checked to lie inside the memory.
        unsafe { std::ptr::write_bytes(base.add(offset), value, len) }
        Ok(())
    }

    fn clear(&self, value: u8) -> Result<()> {
        match self.bytes {
            // Nothing to clear: a model's KV cache may sit in virtual memory
            // for planning, and is cleared when it is made.
            Bytes::None => Ok(()),
            _ => self.fill(0, self.size, value),
        }
    }

    fn copy_from(&self, dst_offset: usize, src: &dyn Buffer, src_offset: usize, len: usize) -> Result<bool> {
        // Only host memory reads another host buffer directly; device-like
        // memory has no peer access (the copy is staged through the host).
        let Some(src_base) = src.host_ptr().filter(|_| self.host_ptr && self.writable) else {
            return Ok(false);
        };
        let base = self.base_for_write()?;
        check_range(&self.name, self.size, dst_offset, len)?;
        check_range("source", src.size(), src_offset, len)?;
        // SAFETY: both ranges were checked against their buffers; `copy` allows overlap.
        unsafe { std::ptr::copy(src_base.add(src_offset), base.add(dst_offset), len) }
        Ok(true)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_buffers_are_aligned_filled_and_checked() {
        let bt = TestBufferType::host("h", 256);
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
        let garbage = TestBufferType::device("d", 8).filled_with(0xAA).alloc_buffer(4).unwrap();
        garbage.read(0, &mut out).unwrap();
        assert_eq!(out, [0xAA; 4]);
        assert!(garbage.host_ptr().is_none());
    }

    #[test]
    fn max_size_read_only_and_virtual_are_enforced() {
        let bt = TestBufferType::host("h", 16).with_max_size(100);
        assert!(matches!(bt.alloc_buffer(101), Err(Error::OutOfMemory { .. })));
        let v = TestBufferType::virtual_memory("v", 16).with_max_size(100);
        assert!(v.alloc_buffer(100).is_ok());
        assert!(v.alloc_buffer(101).is_err());
        assert!(v.alloc_buffer(10).unwrap().write(0, &[1]).is_err());
        let ro = TestBufferType::host("ro", 16).read_only().alloc_buffer(8).unwrap();
        assert!(!ro.is_writable() && ro.write(0, &[1]).is_err() && ro.fill(0, 1, 0).is_err());
        let src = TestBufferType::host("src", 16).alloc_buffer(8).unwrap();
        assert!(!ro.copy_from(0, src.as_ref(), 0, 4).unwrap(), "read-only memory takes no copies");
    }
}
