//! A device on a server, seen from the client: its props from the
//! handshake, memory and op support asked of the server, buffers in the
//! server's memory, and events kept here.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gantry_engine::{
    Backend, BackendErrorKind, BufferType, Context, Device, DeviceCaps, DeviceType, EventId, EventTable, MemoryInfo,
    Result, TensorId,
};

use super::backend::RemoteBackend;
use super::buffer::RemoteBufferType;
use super::encode::encode_query;
use super::link::Link;
use crate::wire::{Request, Response, WireDevice, Writer};

pub(crate) struct DeviceInner {
    pub(crate) link: Arc<Link>,
    pub(crate) index: u32,
    name: String,
    description: String,
    info: WireDevice,
    buffer_type: Arc<RemoteBufferType>,
    /// Events complete as soon as they are recorded: every call returns
    /// after the server has done the work.
    events: EventTable,
    /// The server's answers to "supports this op?", by the query's bytes.
    supported: Mutex<HashMap<Vec<u8>, bool>>,
}

/// A device of a `gantry rpc-server`. Cheap to clone; clones share the link.
#[derive(Clone)]
pub struct RemoteDevice {
    pub(crate) inner: Arc<DeviceInner>,
}

impl std::fmt::Debug for RemoteDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteDevice").field("name", &self.inner.name).field("server", &self.inner.link).finish()
    }
}

impl RemoteDevice {
    pub(crate) fn new(link: Arc<Link>, index: u32, name: String, weight_cache: bool) -> Self {
        let info = link.welcome().devices[index as usize].clone();
        let description = format!("{} ({}) on {}", info.name, info.description, link.address());
        let cache = weight_cache && link.welcome().cached_weights > 0;
        // The buffer type names its device through a weak link (no cycle).
        let inner = Arc::new_cyclic(|owner| {
            let buffer_type =
                Arc::new(RemoteBufferType::new(link.clone(), index, name.clone(), &info, cache, owner.clone()));
            DeviceInner {
                link,
                index,
                name,
                description,
                info,
                buffer_type,
                events: EventTable::default(),
                supported: Mutex::new(HashMap::new()),
            }
        });
        Self { inner }
    }

    /// The device's name on its server (`"CPU"`).
    pub fn server_name(&self) -> &str {
        &self.inner.info.name
    }

    /// The address of its server.
    pub fn address(&self) -> &str {
        self.inner.link.address()
    }

    /// Why the link to the server is down, or `None` while it is up.
    pub fn lost_reason(&self) -> Option<String> {
        self.inner.link.lost_reason()
    }

    pub(crate) fn events(&self) -> &EventTable {
        &self.inner.events
    }

    fn ask_supports(&self, ctx: &Context, tensor: TensorId) -> Result<bool> {
        let graph = encode_query(ctx, tensor)?;
        let mut key = Writer::new();
        graph.write(&mut key);
        let key = key.into_bytes();
        let cache = || self.inner.supported.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&known) = cache().get(&key) {
            return Ok(known);
        }
        let answer = match self.inner.link.call(&Request::SupportsOp { device: self.inner.index, graph })? {
            Response::Supported(yes) => yes,
            other => {
                let reason = format!("supports op answered with {other:?}");
                return Err(gantry_engine::Error::backend(&self.inner.name, BackendErrorKind::Protocol, reason));
            }
        };
        cache().insert(key, answer);
        Ok(answer)
    }
}

/// The scheduler's type of a served device: GPUs stay GPUs; a server's CPU
/// is an accelerator here, so the local CPU stays the scheduler's fallback.
fn device_type_of(code: u8) -> DeviceType {
    match code {
        1 => DeviceType::Gpu,
        2 => DeviceType::IGpu,
        _ => DeviceType::Accel,
    }
}

impl Device for RemoteDevice {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    /// Asked of the server; what it said in the handshake when it cannot be reached.
    fn memory(&self) -> MemoryInfo {
        match self.inner.link.call(&Request::DeviceMemory { device: self.inner.index }) {
            Ok(Response::Memory { free, total }) => MemoryInfo { free: free as usize, total: total as usize },
            _ => {
                MemoryInfo { free: self.inner.info.memory_free as usize, total: self.inner.info.memory_total as usize }
            }
        }
    }

    fn device_type(&self) -> DeviceType {
        device_type_of(self.inner.info.device_type)
    }

    fn caps(&self) -> DeviceCaps {
        DeviceCaps { async_compute: false, host_buffer: false, buffer_from_host_ptr: false, events: true }
    }

    /// Backend parameters are the server's business (`rpc-server --threads`): ignored.
    fn init_backend(&self, _params: Option<&str>) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(RemoteBackend::new(self.clone())))
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.inner.buffer_type.clone()
    }

    /// The server device's own answer (cached per kind of node). Ops that
    /// compute nothing run anywhere; an unreachable server supports nothing.
    fn supports_op(&self, ctx: &Context, tensor: TensorId) -> bool {
        let Some(desc) = ctx.get(tensor) else { return false };
        if desc.op.is_empty() {
            return true;
        }
        match self.ask_supports(ctx, tensor) {
            Ok(yes) => yes,
            Err(e) => {
                tracing::debug!(device = %self.inner.name, error = %e, "supports_op failed");
                false
            }
        }
    }

    fn supports_buft(&self, buft: &dyn BufferType) -> bool {
        buft.as_any()
            .downcast_ref::<RemoteBufferType>()
            .is_some_and(|b| std::ptr::eq(b, Arc::as_ptr(&self.inner.buffer_type)))
    }

    fn event_new(&self) -> Result<EventId> {
        Ok(self.inner.events.create())
    }

    fn event_free(&self, event: EventId) -> Result<()> {
        self.inner.events.free(event)
    }

    fn event_synchronize(&self, event: EventId) -> Result<()> {
        self.inner.events.wait(event)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
