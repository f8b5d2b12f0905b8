//! A heap-backed buffer type for the engine's unit tests (the real ones live
//! in `gantry-backends`).

use std::any::Any;
use std::sync::{Arc, Mutex};

use crate::{Buffer, BufferType, Result, check_range};

/// Plain heap memory with a configurable maximum buffer size; read-only
/// when `writable` is false (like a buffer over a read-only file mapping).
pub(crate) struct TestBuft {
    pub(crate) max: usize,
    pub(crate) align: usize,
    pub(crate) writable: bool,
}

/// Memory and whether it may be written.
pub(crate) struct TestBuffer(Mutex<Vec<u8>>, bool);

impl Buffer for TestBuffer {
    fn size(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn host_ptr(&self) -> Option<*mut u8> {
        None
    }
    fn is_writable(&self) -> bool {
        self.1
    }
    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let mut m = self.0.lock().unwrap();
        check_range("test", m.len(), offset, data.len())?;
        m[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let m = self.0.lock().unwrap();
        check_range("test", m.len(), offset, out.len())?;
        out.copy_from_slice(&m[offset..offset + out.len()]);
        Ok(())
    }
    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        let mut m = self.0.lock().unwrap();
        check_range("test", m.len(), offset, len)?;
        m[offset..offset + len].fill(value);
        Ok(())
    }
    fn copy_from(&self, _: usize, _: &dyn Buffer, _: usize, _: usize) -> Result<bool> {
        Ok(false)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl BufferType for TestBuft {
    fn name(&self) -> &str {
        "test"
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        Ok(Box::new(TestBuffer(Mutex::new(vec![0; size]), self.writable)))
    }
    fn alignment(&self) -> usize {
        self.align
    }
    fn max_size(&self) -> usize {
        self.max
    }
    fn is_host(&self) -> bool {
        false
    }
    fn device_name(&self) -> &str {
        "test"
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A writable test buffer type.
pub(crate) fn buft(max: usize, align: usize) -> Arc<dyn BufferType> {
    Arc::new(TestBuft { max, align, writable: true })
}
