//! CPU buffers and buffer types: aligned host memory, and buffers over
//! caller memory (an mmap'd model file) that do not own it.

use std::any::Any;
use std::sync::{Arc, OnceLock};

use gantry_engine::{Buffer, BufferType, Device, Error, HostMemory, Result, check_range};

use super::aligned::{AlignedBytes, CPU_ALIGNMENT};

pub use gantry_engine::MAPPED_ALIGNMENT;

/// The CPU's buffer type: 64-byte aligned host memory.
#[derive(Debug)]
pub struct CpuBufferType {
    name: &'static str,
    alignment: usize,
}

impl BufferType for CpuBufferType {
    fn name(&self) -> &str {
        self.name
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        Ok(Box::new(CpuBuffer { memory: AlignedBytes::zeroed(size, self.name)? }))
    }

    fn alignment(&self) -> usize {
        self.alignment
    }

    fn max_size(&self) -> usize {
        isize::MAX as usize
    }

    fn is_host(&self) -> bool {
        true
    }

    fn device(&self) -> Option<Arc<dyn Device>> {
        Some(super::device::shared_device())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The one shared CPU buffer type (`"CPU"`, 64-byte alignment, host memory).
/// Every call returns the same object, so [`gantry_engine::same_buffer_type`]
/// recognizes it.
pub fn buffer_type() -> Arc<dyn BufferType> {
    static CPU: OnceLock<Arc<dyn BufferType>> = OnceLock::new();
    CPU.get_or_init(|| Arc::new(CpuBufferType { name: "CPU", alignment: CPU_ALIGNMENT })).clone()
}

/// The buffer type to register buffers over caller memory with (`"CPU_Mapped"`:
/// host memory, 32-byte alignment, see [`MAPPED_ALIGNMENT`]). Allocating from
/// it gives ordinary aligned CPU memory.
pub fn mapped_buffer_type() -> Arc<dyn BufferType> {
    static MAPPED: OnceLock<Arc<dyn BufferType>> = OnceLock::new();
    MAPPED.get_or_init(|| Arc::new(CpuBufferType { name: "CPU_Mapped", alignment: MAPPED_ALIGNMENT })).clone()
}

/// Copies `len` bytes between host addresses that may overlap.
///
/// # Safety
/// Both ranges must be valid for `len` bytes.
unsafe fn copy_bytes(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: guaranteed by the caller; `copy` allows overlap.
    unsafe { std::ptr::copy(src, dst, len) }
}

/// Host memory owned by the buffer.
#[derive(Debug)]
pub struct CpuBuffer {
    memory: AlignedBytes,
}

impl Buffer for CpuBuffer {
    fn size(&self) -> usize {
        self.memory.len()
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.memory.as_ptr())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        host_write(self.memory.as_ptr(), self.size(), offset, data)
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        host_read(self.memory.as_ptr(), self.size(), offset, out)
    }

    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        host_fill(self.memory.as_ptr(), self.size(), offset, len, value)
    }

    fn copy_from(&self, dst_offset: usize, src: &dyn Buffer, src_offset: usize, len: usize) -> Result<bool> {
        host_copy_from(self.memory.as_ptr(), self.size(), dst_offset, src, src_offset, len)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A buffer over caller memory ([`HostMemory`]): it never frees it, and
/// refuses writes when the memory is read-only.
#[derive(Debug)]
pub struct HostMemoryBuffer {
    memory: HostMemory,
}

impl HostMemoryBuffer {
    /// A buffer over `memory`.
    pub fn new(memory: HostMemory) -> Self {
        Self { memory }
    }

    fn check_writable(&self) -> Result<()> {
        if self.memory.is_writable() {
            Ok(())
        } else {
            Err(Error::Unsupported(format!(
                "CPU_Mapped buffer of {} bytes is read-only caller memory",
                self.memory.len()
            )))
        }
    }
}

impl Buffer for HostMemoryBuffer {
    fn size(&self) -> usize {
        self.memory.len()
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.memory.as_ptr())
    }

    fn is_writable(&self) -> bool {
        self.memory.is_writable()
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        host_write(self.memory.as_ptr(), self.size(), offset, data)
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        host_read(self.memory.as_ptr(), self.size(), offset, out)
    }

    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        self.check_writable()?;
        host_fill(self.memory.as_ptr(), self.size(), offset, len, value)
    }

    fn copy_from(&self, dst_offset: usize, src: &dyn Buffer, src_offset: usize, len: usize) -> Result<bool> {
        self.check_writable()?;
        host_copy_from(self.memory.as_ptr(), self.size(), dst_offset, src, src_offset, len)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn host_write(base: *mut u8, size: usize, offset: usize, data: &[u8]) -> Result<()> {
    check_range("CPU", size, offset, data.len())?;
    // SAFETY: the range lies inside the buffer (checked above); `data` is a valid slice.
    unsafe { copy_bytes(base.add(offset), data.as_ptr(), data.len()) };
    Ok(())
}

fn host_read(base: *mut u8, size: usize, offset: usize, out: &mut [u8]) -> Result<()> {
    check_range("CPU", size, offset, out.len())?;
    // SAFETY: the range lies inside the buffer (checked above); `out` is a valid slice.
    unsafe { copy_bytes(out.as_mut_ptr(), base.add(offset), out.len()) };
    Ok(())
}

fn host_fill(base: *mut u8, size: usize, offset: usize, len: usize, value: u8) -> Result<()> {
    check_range("CPU", size, offset, len)?;
    // SAFETY: the range lies inside the buffer (checked above).
    unsafe { std::ptr::write_bytes(base.add(offset), value, len) };
    Ok(())
}

/// A host destination can read any source: host memory directly, other
/// memory through the source buffer's own `read`.
fn host_copy_from(
    base: *mut u8,
    size: usize,
    dst_offset: usize,
    src: &dyn Buffer,
    src_offset: usize,
    len: usize,
) -> Result<bool> {
    check_range("CPU", size, dst_offset, len)?;
    check_range("source", src.size(), src_offset, len)?;
    match src.host_ptr() {
        // SAFETY: both ranges were checked against their buffers' sizes.
        Some(src_base) => unsafe { copy_bytes(base.add(dst_offset), src_base.add(src_offset), len) },
        None => {
            // SAFETY: the destination range was checked; no other reference to
            // these bytes is alive while `src.read` fills them.
            let out = unsafe { std::slice::from_raw_parts_mut(base.add(dst_offset), len) };
            src.read(src_offset, out)?;
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_type_is_shared_host_and_aligned() {
        let a = buffer_type();
        assert!(gantry_engine::same_buffer_type(&a, &buffer_type()));
        assert!(a.is_host() && a.alignment() == 64 && a.name() == "CPU");
        let empty = a.alloc_buffer(0).unwrap();
        assert_eq!(empty.size(), 0);
        assert!(empty.write(0, &[]).is_ok());
        assert!(empty.write(0, &[1]).is_err());
        let b = a.alloc_buffer(100).unwrap();
        assert_eq!(b.host_ptr().unwrap() as usize % 64, 0);
    }

    #[test]
    fn every_access_is_bounds_checked() {
        let b = buffer_type().alloc_buffer(16).unwrap();
        b.write(8, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert!(b.write(9, &[0; 8]).is_err());
        assert!(b.fill(usize::MAX, 2, 0).is_err());
        let mut out = [0u8; 4];
        b.read(12, &mut out).unwrap();
        assert_eq!(out, [5, 6, 7, 8]);
        assert!(b.read(13, &mut out).is_err());
        b.clear(9).unwrap();
        b.read(0, &mut out).unwrap();
        assert_eq!(out, [9; 4]);
        let c = buffer_type().alloc_buffer(8).unwrap();
        assert!(c.copy_from(0, b.as_ref(), 12, 8).is_err(), "source range past the end");
        assert!(c.copy_from(4, b.as_ref(), 0, 4).unwrap());
        c.read(4, &mut out).unwrap();
        assert_eq!(out, [9; 4]);
    }

    #[test]
    fn host_memory_is_borrowed_and_read_only_refuses_writes() {
        let bytes = Arc::new(vec![1u8, 2, 3, 4]);
        let buf = HostMemoryBuffer::new(HostMemory::read_only(bytes.clone()));
        assert_eq!(buf.host_ptr().unwrap() as *const u8, bytes.as_ptr(), "no copy is made");
        let mut out = [0u8; 2];
        buf.read(2, &mut out).unwrap();
        assert_eq!(out, [3, 4]);
        assert!(!buf.is_writable());
        let err = buf.write(0, &[0]).unwrap_err().to_string();
        assert!(err.contains("read-only"), "{err}");
        assert!(buf.fill(0, 1, 0).is_err() && buf.clear(0).is_err());
        assert_eq!(*bytes, vec![1, 2, 3, 4]);
        drop(buf);
        assert_eq!(Arc::strong_count(&bytes), 1, "the buffer released its handle on the owner");
    }
}
