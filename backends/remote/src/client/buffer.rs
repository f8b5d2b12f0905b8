//! Buffers in a server's memory: every access is a call, checked here
//! against the buffer's size before it is sent (and again by the server).

use std::any::Any;
use std::sync::{Arc, Weak};

use gantry_engine::{BackendErrorKind, Buffer, BufferType, Device, Error, Result, check_range};

use super::device::{DeviceInner, RemoteDevice};
use super::link::Link;
use crate::wire::{Request, Response, WireDevice, content_digest};

/// Writes shorter than this are sent, not looked up in the server's cache
/// (hashing and asking would cost more than sending).
const MIN_CACHED_WRITE: usize = 4096;

/// The memory of one remote device.
pub struct RemoteBufferType {
    link: Arc<Link>,
    device: u32,
    name: String,
    alignment: usize,
    max_size: usize,
    weight_cache: bool,
    /// The device this memory belongs to (gone once every handle to it is).
    owner: Weak<DeviceInner>,
}

impl RemoteBufferType {
    pub(crate) fn new(
        link: Arc<Link>,
        device: u32,
        name: String,
        info: &WireDevice,
        weight_cache: bool,
        owner: Weak<DeviceInner>,
    ) -> Self {
        // The server's alignment, at least ggml's tensor alignment, as a power of two.
        let alignment = usize::try_from(info.alignment).unwrap_or(64).max(32).next_power_of_two();
        let max_size = usize::try_from(info.max_buffer).unwrap_or(usize::MAX);
        Self { link, device, name, alignment, max_size, weight_cache, owner }
    }
}

impl BufferType for RemoteBufferType {
    fn name(&self) -> &str {
        &self.name
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        if size > self.max_size {
            return Err(Error::OutOfMemory {
                buffer_type: format!("{} (largest buffer {})", self.name, self.max_size),
                size,
            });
        }
        let generation = self.link.generation()?;
        let request = Request::AllocBuffer { device: self.device, size: size as u64 };
        match self.link.call_on(generation, &request)? {
            Response::Buffer { buffer } => Ok(Box::new(RemoteBuffer {
                link: self.link.clone(),
                generation,
                handle: buffer,
                device: self.device,
                size,
                name: self.name.clone(),
                weight_cache: self.weight_cache,
            })),
            other => Err(Error::backend(&self.name, BackendErrorKind::Protocol, format!("alloc answered {other:?}"))),
        }
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

    fn device(&self) -> Option<Arc<dyn Device>> {
        self.owner.upgrade().map(|inner| Arc::new(RemoteDevice { inner }) as Arc<dyn Device>)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A buffer on a server, valid while the connection it was made on lasts.
pub struct RemoteBuffer {
    link: Arc<Link>,
    generation: u64,
    handle: u64,
    device: u32,
    size: usize,
    name: String,
    weight_cache: bool,
}

impl RemoteBuffer {
    /// Where byte `offset` of this buffer is on the server, for a graph on
    /// device `device` of link `link`; `None` when the buffer is elsewhere.
    pub(crate) fn handle_on(&self, link: &Arc<Link>, device: u32) -> Option<(u64, u64)> {
        (Arc::ptr_eq(&self.link, link) && self.device == device).then_some((self.handle, self.generation))
    }

    fn done(&self, what: &str, response: Response) -> Result<()> {
        match response {
            Response::Done => Ok(()),
            other => Err(Error::backend(&self.name, BackendErrorKind::Protocol, format!("{what} answered {other:?}"))),
        }
    }
}

impl Buffer for RemoteBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        None
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_range(&self.name, self.size, offset, data.len())?;
        let request = Request::WriteBuffer { buffer: self.handle, offset: offset as u64, len: data.len() as u64 };
        let response = self.link.upload(self.generation, &request, data)?;
        self.done("write", response)
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range(&self.name, self.size, offset, out.len())?;
        let request = Request::ReadBuffer { buffer: self.handle, offset: offset as u64, len: out.len() as u64 };
        let response = self.link.download(self.generation, &request, out)?;
        self.done("read", response)
    }

    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        check_range(&self.name, self.size, offset, len)?;
        let request = Request::FillBuffer { buffer: self.handle, offset: offset as u64, len: len as u64, value };
        let response = self.link.call_on(self.generation, &request)?;
        self.done("fill", response)
    }

    /// Copies on the server when `src` is a buffer of the same connection.
    fn copy_from(&self, dst_offset: usize, src: &dyn Buffer, src_offset: usize, len: usize) -> Result<bool> {
        let Some(src) = src.as_any().downcast_ref::<RemoteBuffer>() else { return Ok(false) };
        if !Arc::ptr_eq(&src.link, &self.link) || src.generation != self.generation {
            return Ok(false);
        }
        check_range(&self.name, self.size, dst_offset, len)?;
        check_range(&src.name, src.size, src_offset, len)?;
        let request = Request::CopyBuffer {
            src: src.handle,
            src_offset: src_offset as u64,
            dst: self.handle,
            dst_offset: dst_offset as u64,
            len: len as u64,
        };
        let response = self.link.call_on(self.generation, &request)?;
        self.done("copy", response).map(|()| true)
    }

    /// Asks the server to write bytes it holds under `data`'s SHA-256 (the
    /// same model file on its disk) instead of receiving them.
    fn write_from_cache(&self, offset: usize, data: &[u8]) -> Result<bool> {
        if !self.weight_cache || data.len() < MIN_CACHED_WRITE {
            return Ok(false);
        }
        check_range(&self.name, self.size, offset, data.len())?;
        let request = Request::WriteFromCache {
            buffer: self.handle,
            offset: offset as u64,
            len: data.len() as u64,
            digest: content_digest(data),
        };
        match self.link.call_on(self.generation, &request)? {
            Response::Cached(found) => Ok(found),
            other => {
                Err(Error::backend(&self.name, BackendErrorKind::Protocol, format!("cache lookup answered {other:?}")))
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for RemoteBuffer {
    fn drop(&mut self) {
        // Not waited for: a buffer of a lost connection is already gone on the server.
        self.link.send_and_forget(self.generation, &Request::FreeBuffer { buffer: self.handle });
    }
}
