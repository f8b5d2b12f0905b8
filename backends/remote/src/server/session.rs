//! One client's state on the server and what each request does to it.
//!
//! A session owns the client's buffers in a [`Context`] of its own; a
//! graph is built into that context for one compute and removed again. Every
//! request is checked before it touches memory (handles, ranges, devices,
//! the graph through [`super::graph_build`]) and every failure is an error
//! reply that leaves the session as it was. The session is plain,
//! synchronous code: the network layer calls it, and so do the tests and
//! the fuzz target ([`Session::handle_frame`]).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use gantry_engine::{Backend, BufferId, BufferUsage, Context, Device, DeviceType, Error, Graph, Result, TensorId};

use super::graph_build::{BuildMode, BuiltGraph, build_graph};
use super::shared::Shared;
use super::weight_cache::WeightCache;
use crate::wire::{DIGEST_BYTES, Limits, PROTOCOL_VERSION, Request, Response, WireDevice, WireGraph, graph_digest};

/// A device the server exposes, with the backend its computes run on
/// (shared by every session).
#[derive(Clone)]
pub struct ServedDevice {
    /// The device.
    pub device: Arc<dyn Device>,
    /// A backend on it.
    pub backend: Arc<dyn Backend>,
}

/// What every session of a server shares.
pub struct ServerState {
    /// The devices, by the index clients use.
    pub devices: Vec<ServedDevice>,
    /// Byte runs clients may bind by digest.
    pub weights: WeightCache,
    /// Bounds on requests.
    pub limits: Limits,
    /// The server's name for itself (in the handshake).
    pub name: String,
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.devices.iter().map(|d| d.device.name()).collect();
        f.debug_struct("ServerState").field("devices", &names).field("weights", &self.weights).finish()
    }
}

/// The wire code of a device type.
pub fn device_type_code(t: DeviceType) -> u8 {
    match t {
        DeviceType::Cpu => 0,
        DeviceType::Gpu => 1,
        DeviceType::IGpu => 2,
        DeviceType::Accel => 3,
    }
}

struct SessionBuffer {
    id: BufferId,
    device: u32,
    size: usize,
}

/// A graph built for a compute and kept, so that the same graph asked again
/// by digest ([`Request::GraphComputeAgain`]) is neither sent nor checked again.
struct KeptGraph {
    device: u32,
    digest: [u8; DIGEST_BYTES],
    built: BuiltGraph,
}

/// One client connection's state: its buffers, and whether it said hello.
pub struct Session {
    state: Arc<ServerState>,
    /// The memory cap and compute turns this session shares with the others.
    shared: Arc<Shared>,
    ctx: Context,
    buffers: HashMap<u64, SessionBuffer>,
    next_handle: u64,
    allocated: usize,
    greeted: bool,
    /// Reused for staging copies between buffers that cannot copy directly.
    staging: Vec<u8>,
    /// Graphs kept for computing again, most recently used last.
    graphs: Vec<KeptGraph>,
    /// The graph the request being handled built and computed, to keep.
    to_keep: Option<KeptGraph>,
}

impl Session {
    /// A session that has not said hello yet, on its own: the memory cap
    /// and the devices' compute turns are its alone (for tests and the fuzz
    /// target; a running server's sessions share them).
    pub fn new(state: Arc<ServerState>) -> Self {
        let shared = Arc::new(Shared::new(&state));
        Self::joined(state, shared)
    }

    /// A session that has not said hello yet, sharing `shared` with the
    /// other sessions of its server.
    pub(crate) fn joined(state: Arc<ServerState>, shared: Arc<Shared>) -> Self {
        Self {
            state,
            shared,
            ctx: Context::new(),
            buffers: HashMap::new(),
            next_handle: 1,
            allocated: 0,
            greeted: false,
            staging: Vec::new(),
            graphs: Vec::new(),
            to_keep: None,
        }
    }

    /// The server's limits.
    pub fn limits(&self) -> &Limits {
        &self.state.limits
    }

    /// Number of buffers the client holds.
    pub fn buffer_count(&self) -> usize {
        self.buffers.len()
    }

    /// Bytes of the buffers the client holds (a buffer of 0 bytes holds none).
    pub fn buffer_bytes(&self) -> usize {
        self.allocated
    }

    /// Answers one request that carries no raw bytes (everything but a write's
    /// or a read's data: see [`Session::write`], [`Session::read`]). A failure,
    /// and a panic in a backend, is an error reply; the session stays usable.
    pub fn handle(&mut self, request: &Request<'_>) -> Response {
        let mark = self.ctx.mark();
        let outcome = catch_unwind(AssertUnwindSafe(|| self.dispatch(request)));
        match self.to_keep.take() {
            // The tensors made since the mark are exactly the kept graph's.
            Some(graph) if matches!(outcome, Ok(Ok(_))) => self.keep(graph),
            // Whatever a request left behind goes, also after a failure or a panic.
            _ => self.ctx.rewind(mark),
        }
        match outcome {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => Response::Error(format!("{}: {e}", request.name())),
            Err(_) => Response::Error(format!("{}: the server failed on this request", request.name())),
        }
    }

    fn dispatch(&mut self, request: &Request<'_>) -> Result<Response> {
        if let Request::Hello { version, .. } = request {
            return self.hello(*version);
        }
        if !self.greeted {
            return Err(Error::Unsupported("the first request of a connection must be hello".into()));
        }
        match request {
            Request::Hello { .. } => Err(Error::Unsupported("hello was already said".into())),
            Request::DeviceMemory { device } => {
                let m = self.device(*device)?.device.memory();
                Ok(Response::Memory { free: m.free as u64, total: m.total as u64 })
            }
            Request::SupportsOp { device, graph } => self.supports_op(*device, graph),
            Request::AllocBuffer { device, size } => self.alloc(*device, *size),
            Request::FreeBuffer { buffer } => {
                let b = self.buffers.remove(buffer).ok_or_else(|| stale(*buffer))?;
                // Kept graphs may read it: they go first.
                self.drop_graphs();
                self.allocated -= b.size;
                self.shared.memory.give_back(b.size as u64);
                self.ctx.free_buffer(b.id)?;
                Ok(Response::Done)
            }
            Request::FillBuffer { buffer, offset, len, value } => {
                let (id, offset, len) = self.range(*buffer, *offset, *len)?;
                self.ctx.buffer(id)?.buffer.fill(offset, len, *value)?;
                Ok(Response::Done)
            }
            Request::WriteBuffer { .. } | Request::ReadBuffer { .. } => {
                Err(Error::Unsupported("writes and reads carry bytes: use Session::write / Session::read".into()))
            }
            Request::CopyBuffer { src, src_offset, dst, dst_offset, len } => {
                self.copy(*src, *src_offset, *dst, *dst_offset, *len)
            }
            Request::WriteFromCache { buffer, offset, len, digest } => {
                let (id, offset, len) = self.range(*buffer, *offset, *len)?;
                match self.state.weights.get(digest) {
                    Some(bytes) if bytes.len() == len => {
                        self.ctx.buffer(id)?.buffer.write(offset, bytes)?;
                        Ok(Response::Cached(true))
                    }
                    _ => Ok(Response::Cached(false)),
                }
            }
            Request::GraphCompute { device, graph } => self.compute(*device, graph),
            Request::GraphComputeAgain { device, digest } => self.compute_again(*device, digest),
        }
    }

    /// Number of graphs kept for computing again.
    pub fn kept_graphs(&self) -> usize {
        self.graphs.len()
    }

    fn keep(&mut self, graph: KeptGraph) {
        if let Some(same) = self.graphs.iter().position(|g| g.device == graph.device && g.digest == graph.digest) {
            let old = self.graphs.remove(same);
            self.remove_tensors(&old.built);
        }
        self.graphs.push(graph);
        while self.graphs.len() > self.state.limits.kept_graphs {
            let oldest = self.graphs.remove(0);
            self.remove_tensors(&oldest.built);
        }
    }

    fn remove_tensors(&mut self, built: &BuiltGraph) {
        for &t in built.tensors.iter().rev() {
            let _ = self.ctx.remove(t);
        }
    }

    fn drop_graphs(&mut self) {
        for g in std::mem::take(&mut self.graphs) {
            self.remove_tensors(&g.built);
        }
    }

    fn hello(&mut self, version: u32) -> Result<Response> {
        if version != PROTOCOL_VERSION {
            return Err(Error::Unsupported(format!(
                "protocol version {version} is not spoken here: this server speaks version {PROTOCOL_VERSION}"
            )));
        }
        self.greeted = true;
        let devices = self
            .state
            .devices
            .iter()
            .map(|d| {
                let m = d.device.memory();
                let buft = d.device.buffer_type();
                WireDevice {
                    name: d.device.name().to_owned(),
                    description: d.device.description().to_owned(),
                    device_type: device_type_code(d.device.device_type()),
                    memory_free: m.free as u64,
                    memory_total: m.total as u64,
                    alignment: buft.alignment() as u64,
                    max_buffer: buft.max_size() as u64,
                }
            })
            .collect();
        Ok(Response::Welcome {
            version: PROTOCOL_VERSION,
            server: self.state.name.clone(),
            cached_weights: self.state.weights.len() as u64,
            devices,
        })
    }

    fn device(&self, index: u32) -> Result<&ServedDevice> {
        self.state
            .devices
            .get(index as usize)
            .ok_or_else(|| Error::NotFound(format!("device {index} (this server has {})", self.state.devices.len())))
    }

    fn alloc(&mut self, device: u32, size: u64) -> Result<Response> {
        let served = self.device(device)?.clone();
        let buft = served.device.buffer_type();
        let size = usize::try_from(size).map_err(|_| Error::Overflow(format!("buffer of {size} bytes")))?;
        if self.buffers.len() >= self.state.limits.max_buffers {
            return Err(Error::Unsupported(format!(
                "a client may hold {} buffers on this server",
                self.state.limits.max_buffers
            )));
        }
        // A client may not ask for more than the device has (allocations are
        // lazy on some systems and would fail later, at a write).
        let total = served.device.memory().total;
        if size > buft.max_size() || self.allocated.saturating_add(size) > total {
            return Err(Error::OutOfMemory { buffer_type: buft.name().to_owned(), size });
        }
        // Every client together, before the memory is asked for.
        self.shared.memory.take(size as u64)?;
        let id = match self.ctx.alloc_buffer(&buft, size, BufferUsage::Any) {
            Ok(id) => id,
            Err(e) => {
                self.shared.memory.give_back(size as u64);
                return Err(e);
            }
        };
        let handle = self.next_handle;
        self.next_handle += 1;
        self.buffers.insert(handle, SessionBuffer { id, device, size });
        self.allocated += size;
        Ok(Response::Buffer { buffer: handle })
    }

    /// Checks that `len` bytes at `offset` lie in buffer `buffer` and returns
    /// them as this machine's sizes.
    fn range(&self, buffer: u64, offset: u64, len: u64) -> Result<(BufferId, usize, usize)> {
        let b = self.buffers.get(&buffer).ok_or_else(|| stale(buffer))?;
        let (offset, len) = match (usize::try_from(offset), usize::try_from(len)) {
            (Ok(o), Ok(l)) => (o, l),
            _ => return Err(Error::OutOfBounds(format!("{len} bytes at offset {offset}"))),
        };
        gantry_engine::check_range(&format!("buffer {buffer}"), b.size, offset, len)?;
        Ok((b.id, offset, len))
    }

    /// Checks a write or read of `len` bytes before any of them moves.
    pub fn check_transfer(&self, buffer: u64, offset: u64, len: u64) -> Result<()> {
        if !self.greeted {
            return Err(Error::Unsupported("the first request of a connection must be hello".into()));
        }
        self.range(buffer, offset, len).map(drop)
    }

    /// Writes `data` at `offset` of `buffer` (one chunk of a write).
    pub fn write(&self, buffer: u64, offset: u64, data: &[u8]) -> Result<()> {
        let (id, offset, _) = self.range(buffer, offset, data.len() as u64)?;
        self.ctx.buffer(id)?.buffer.write(offset, data)
    }

    /// Reads `out.len()` bytes at `offset` of `buffer` (one chunk of a read).
    pub fn read(&self, buffer: u64, offset: u64, out: &mut [u8]) -> Result<()> {
        let (id, offset, _) = self.range(buffer, offset, out.len() as u64)?;
        self.ctx.buffer(id)?.buffer.read(offset, out)
    }

    fn copy(&mut self, src: u64, src_offset: u64, dst: u64, dst_offset: u64, len: u64) -> Result<Response> {
        let (s, so, n) = self.range(src, src_offset, len)?;
        let (d, dof, _) = self.range(dst, dst_offset, len)?;
        let (se, de) = (self.ctx.buffer(s)?, self.ctx.buffer(d)?);
        if !de.buffer.copy_from(dof, se.buffer.as_ref(), so, n)? {
            let chunk = self.state.limits.chunk_bytes.max(1);
            self.staging.resize(chunk.min(n), 0);
            let mut done = 0;
            while done < n {
                let step = chunk.min(n - done);
                se.buffer.read(so + done, &mut self.staging[..step])?;
                de.buffer.write(dof + done, &self.staging[..step])?;
                done += step;
            }
        }
        Ok(Response::Done)
    }

    fn supports_op(&mut self, device: u32, graph: &WireGraph<'_>) -> Result<Response> {
        let served = self.device(device)?.clone();
        let limits = self.state.limits;
        let nodes = {
            let no_buffers = |h: u64| -> Result<BufferId> { Err(stale(h)) };
            build_graph(&mut self.ctx, graph, &no_buffers, BuildMode::Query, &limits)?.nodes
        };
        let last = *nodes.last().ok_or_else(|| Error::Unsupported("the graph has no node to ask about".into()))?;
        Ok(Response::Supported(served.device.supports_op(&self.ctx, last)))
    }

    fn compute(&mut self, device: u32, graph: &WireGraph<'_>) -> Result<Response> {
        let served = self.device(device)?.clone();
        let limits = self.state.limits;
        let buffers = &self.buffers;
        // Only this device's buffers are its memory.
        let resolve = move |handle: u64| -> Result<BufferId> {
            let b = buffers.get(&handle).ok_or_else(|| stale(handle))?;
            if b.device == device {
                Ok(b.id)
            } else {
                Err(Error::Unsupported(format!("buffer {handle} belongs to device {}, not {device}", b.device)))
            }
        };
        let built = build_graph(&mut self.ctx, graph, &resolve, BuildMode::Compute, &limits)?;
        let nodes = &built.nodes;
        for &n in nodes {
            let op = self.ctx.desc(n)?.op;
            if !op.is_empty() && !served.device.supports_op(&self.ctx, n) {
                return Err(Error::Unsupported(format!(
                    "{} cannot compute {} {}",
                    served.device.name(),
                    op.name(),
                    self.ctx.describe(n)
                )));
            }
        }
        self.run_compute(device, &served, nodes)?;
        self.to_keep = Some(KeptGraph { device, digest: graph_digest(device, graph), built });
        Ok(Response::Done)
    }

    fn compute_again(&mut self, device: u32, digest: &[u8; DIGEST_BYTES]) -> Result<Response> {
        let served = self.device(device)?.clone();
        let Some(at) = self.graphs.iter().position(|g| g.device == device && &g.digest == digest) else {
            return Ok(Response::UnknownGraph);
        };
        let graph = self.graphs.remove(at);
        let computed = self.run_compute(device, &served, &graph.built.nodes);
        // Most recently used last, whatever the outcome.
        self.graphs.push(graph);
        computed?;
        Ok(Response::Done)
    }

    /// Computes `nodes` on `served` (device `device`) in the device's turn,
    /// under the server's compute deadline.
    fn run_compute(&self, device: u32, served: &ServedDevice, nodes: &[TensorId]) -> Result<()> {
        let gate = self
            .shared
            .gates
            .get(device as usize)
            .ok_or_else(|| Error::NotFound(format!("device {device} has no compute turn")))?;
        let backend = served.backend.as_ref();
        gate.run(backend, self.state.limits.compute_timeout, || {
            backend.graph_compute(&self.ctx, Graph::from_parts(nodes, &[], &[])).into_result()?;
            backend.synchronize()
        })
    }

    /// Decodes and answers one whole frame as it arrives on a stream (a
    /// `u32` length, the message, then a write's bytes) and returns the
    /// response frame (with a read's bytes after it). The network layer
    /// streams writes and reads in chunks instead; this is the same decoder
    /// and the same checks in one call, for tests and the fuzz target.
    pub fn handle_frame(&mut self, frame: &[u8]) -> Vec<u8> {
        let (response, payload) = self.frame_response(frame);
        let message = response.encode();
        let mut out = Vec::with_capacity(4 + message.len() + payload.len());
        out.extend_from_slice(&(message.len() as u32).to_le_bytes());
        out.extend_from_slice(&message);
        out.extend_from_slice(&payload);
        out
    }

    fn frame_response(&mut self, frame: &[u8]) -> (Response, Vec<u8>) {
        let limits = self.state.limits;
        let Some((len, rest)) = frame.split_first_chunk::<4>() else {
            return (Response::Error("a frame starts with its length".into()), Vec::new());
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > limits.max_message_bytes || len > rest.len() {
            return (Response::Error(format!("a message of {len} bytes does not fit this frame")), Vec::new());
        }
        let (message, payload) = rest.split_at(len);
        let request = match Request::decode(message, &limits) {
            Ok(r) => r,
            Err(e) => return (Response::Error(format!("bad request: {e}")), Vec::new()),
        };
        match request {
            Request::WriteBuffer { buffer, offset, len } => {
                let result = if payload.len() as u64 != len {
                    Err(Error::OutOfBounds(format!("{len} bytes announced, {} sent", payload.len())))
                } else {
                    self.check_transfer(buffer, offset, len).and_then(|()| self.write(buffer, offset, payload))
                };
                (result.map_or_else(|e| Response::Error(format!("write buffer: {e}")), |()| Response::Done), Vec::new())
            }
            Request::ReadBuffer { buffer, offset, len } => {
                if let Err(e) = self.check_transfer(buffer, offset, len) {
                    return (Response::Error(format!("read buffer: {e}")), Vec::new());
                }
                // The range was checked against an allocated buffer: this is bounded by it.
                let mut out = vec![0u8; len as usize];
                match self.read(buffer, offset, &mut out) {
                    Ok(()) => (Response::Done, out),
                    Err(e) => (Response::Error(format!("read buffer: {e}")), Vec::new()),
                }
            }
            other if payload.is_empty() => (self.handle(&other), Vec::new()),
            other => (Response::Error(format!("{}: {} unexpected bytes", other.name(), payload.len())), Vec::new()),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The buffers go with the context: their bytes are the other clients' again.
        self.shared.memory.give_back(self.allocated as u64);
    }
}

fn stale(handle: u64) -> Error {
    Error::StaleHandle { kind: "buffer", handle: handle.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{WireLocation, WireTensor};
    use gantry_cpu::CpuBackend;
    use gantry_engine::MAX_SRC;

    fn state() -> Arc<ServerState> {
        let backend = Arc::new(CpuBackend::with_threads(1).unwrap());
        let device: Arc<dyn Device> = Arc::new(gantry_cpu::CpuDevice::new());
        Arc::new(ServerState {
            devices: vec![ServedDevice { device, backend }],
            weights: WeightCache::new(),
            limits: Limits::default(),
            name: "test".into(),
        })
    }

    fn frame(request: &Request<'_>, payload: &[u8]) -> Vec<u8> {
        let m = request.encode();
        let mut f = (m.len() as u32).to_le_bytes().to_vec();
        f.extend_from_slice(&m);
        f.extend_from_slice(payload);
        f
    }

    fn reply(session: &mut Session, request: &Request<'_>, payload: &[u8]) -> (Response, Vec<u8>) {
        let out = session.handle_frame(&frame(request, payload));
        let len = u32::from_le_bytes(out[..4].try_into().unwrap()) as usize;
        (Response::decode(&out[4..4 + len]).unwrap(), out[4 + len..].to_vec())
    }

    fn hello(s: &mut Session) {
        let (r, _) = reply(s, &Request::Hello { version: PROTOCOL_VERSION, client: "t" }, &[]);
        assert!(matches!(r, Response::Welcome { ref devices, .. } if devices.len() == 1), "{r:?}");
    }

    #[test]
    fn hello_comes_first_and_versions_must_match() {
        let mut s = Session::new(state());
        let (r, _) = reply(&mut s, &Request::AllocBuffer { device: 0, size: 64 }, &[]);
        assert!(matches!(r, Response::Error(ref m) if m.contains("must be hello")), "{r:?}");
        let (r, _) = reply(&mut s, &Request::Hello { version: PROTOCOL_VERSION + 1, client: "t" }, &[]);
        assert!(
            matches!(r, Response::Error(ref m) if m.contains(&format!("speaks version {PROTOCOL_VERSION}"))),
            "{r:?}"
        );
        hello(&mut s);
        let (r, _) = reply(&mut s, &Request::AllocBuffer { device: 0, size: 64 }, &[]);
        assert!(matches!(r, Response::Buffer { .. }), "{r:?}");
    }

    #[test]
    fn buffers_are_written_read_and_checked() {
        let mut s = Session::new(state());
        hello(&mut s);
        let (Response::Buffer { buffer }, _) = reply(&mut s, &Request::AllocBuffer { device: 0, size: 16 }, &[]) else {
            panic!("no buffer");
        };
        let data: Vec<u8> = (1..=8).collect();
        let (r, _) = reply(&mut s, &Request::WriteBuffer { buffer, offset: 4, len: 8 }, &data);
        assert_eq!(r, Response::Done);
        let (r, bytes) = reply(&mut s, &Request::ReadBuffer { buffer, offset: 4, len: 8 }, &[]);
        assert_eq!((r, bytes), (Response::Done, data.clone()));
        for bad in [
            Request::WriteBuffer { buffer, offset: 12, len: 8 },
            Request::ReadBuffer { buffer, offset: u64::MAX, len: 2 },
            Request::ReadBuffer { buffer: buffer + 1, offset: 0, len: 1 },
            Request::FillBuffer { buffer, offset: 0, len: 17, value: 0 },
            Request::CopyBuffer { src: buffer, src_offset: 9, dst: buffer, dst_offset: 0, len: 8 },
            Request::DeviceMemory { device: 3 },
            Request::AllocBuffer { device: 0, size: u64::MAX },
        ] {
            let payload = if matches!(bad, Request::WriteBuffer { .. }) { &data[..] } else { &[] };
            let (r, bytes) = reply(&mut s, &bad, payload);
            assert!(matches!(r, Response::Error(_)) && bytes.is_empty(), "{} gave {r:?}", bad.name());
        }
        // A write announcing more bytes than it sends.
        let (r, _) = reply(&mut s, &Request::WriteBuffer { buffer, offset: 0, len: 9 }, &data);
        assert!(matches!(r, Response::Error(ref m) if m.contains("announced")), "{r:?}");
        let (r, _) =
            reply(&mut s, &Request::CopyBuffer { src: buffer, src_offset: 4, dst: buffer, dst_offset: 0, len: 4 }, &[]);
        assert_eq!(r, Response::Done);
        let (_, bytes) = reply(&mut s, &Request::ReadBuffer { buffer, offset: 0, len: 4 }, &[]);
        assert_eq!(bytes, vec![1, 2, 3, 4]);
        let (r, _) = reply(&mut s, &Request::FreeBuffer { buffer }, &[]);
        assert_eq!(r, Response::Done);
        assert_eq!(s.buffer_count(), 0);
        let (r, _) = reply(&mut s, &Request::FreeBuffer { buffer }, &[]);
        assert!(matches!(r, Response::Error(ref m) if m.contains("stale")), "{r:?}");
    }

    #[test]
    fn a_graph_computes_and_a_bad_one_leaves_nothing_behind() {
        let mut s = Session::new(state());
        hello(&mut s);
        let (Response::Buffer { buffer }, _) = reply(&mut s, &Request::AllocBuffer { device: 0, size: 256 }, &[])
        else {
            panic!("no buffer");
        };
        let x: Vec<u8> = [1.0f32, -2.0, 3.0, -4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        reply(&mut s, &Request::WriteBuffer { buffer, offset: 0, len: 16 }, &x);
        let t = |computed, op, srcs: [Option<u32>; MAX_SRC], offset| WireTensor {
            computed,
            view: false,
            dtype: gantry_engine::DType::F32,
            ne: [4, 1, 1, 1],
            nb: [4, 16, 16, 16],
            op,
            srcs,
            location: Some(WireLocation { buffer, offset }),
            name: "x",
        };
        let neg = gantry_engine::Op::Unary(gantry_engine::UnaryOp::Neg);
        let graph = WireGraph {
            tensors: vec![
                t(false, gantry_engine::Op::None, [None; MAX_SRC], 0),
                t(true, neg, std::array::from_fn(|k| (k == 0).then_some(0)), 64),
            ],
        };
        let tensors_before = s.ctx.tensor_count();
        let (r, _) = reply(&mut s, &Request::GraphCompute { device: 0, graph: graph.clone() }, &[]);
        assert_eq!(r, Response::Done);
        let (_, bytes) = reply(&mut s, &Request::ReadBuffer { buffer, offset: 64, len: 16 }, &[]);
        let y: Vec<f32> = bytes.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(y, vec![-1.0, 2.0, -3.0, 4.0]);
        // The same graph again by its digest, without sending it.
        assert_eq!(s.kept_graphs(), 1);
        let digest = graph_digest(0, &graph);
        let x2: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        reply(&mut s, &Request::WriteBuffer { buffer, offset: 0, len: 16 }, &x2);
        let (r, _) = reply(&mut s, &Request::GraphComputeAgain { device: 0, digest }, &[]);
        assert_eq!(r, Response::Done);
        let (_, bytes) = reply(&mut s, &Request::ReadBuffer { buffer, offset: 64, len: 16 }, &[]);
        let y: Vec<f32> = bytes.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(y, vec![-1.0, -2.0, -3.0, -4.0], "computed from the new input");
        let (r, _) = reply(&mut s, &Request::GraphComputeAgain { device: 0, digest: [0; DIGEST_BYTES] }, &[]);
        assert_eq!(r, Response::UnknownGraph);
        let mut bad = graph;
        bad.tensors[1].location = Some(WireLocation { buffer, offset: 250 });
        let (r, _) = reply(&mut s, &Request::GraphCompute { device: 0, graph: bad }, &[]);
        assert!(matches!(r, Response::Error(ref m) if m.contains("do not fit")), "{r:?}");
        assert_eq!(s.kept_graphs(), 1, "a refused graph is not kept");
        let (r, _) = reply(&mut s, &Request::FreeBuffer { buffer }, &[]);
        assert_eq!(r, Response::Done);
        assert_eq!(s.kept_graphs(), 0, "graphs over a freed buffer go with it");
        assert_eq!(s.ctx.tensor_count(), tensors_before, "the graphs' tensors were removed");
        let (r, _) = reply(&mut s, &Request::SupportsOp { device: 0, graph: WireGraph::default() }, &[]);
        assert!(matches!(r, Response::Error(_)), "{r:?}");
    }

    #[test]
    fn sessions_of_one_server_share_its_memory_cap_and_give_back_on_drop() {
        let limits = Limits { max_memory: 1000, ..Limits::default() };
        let backend = Arc::new(CpuBackend::with_threads(1).unwrap());
        let device: Arc<dyn Device> = Arc::new(gantry_cpu::CpuDevice::new());
        let state = Arc::new(ServerState {
            devices: vec![ServedDevice { device, backend }],
            weights: WeightCache::new(),
            limits,
            name: "test".into(),
        });
        let shared = Arc::new(Shared::new(&state));
        let (mut a, mut b) = (Session::joined(state.clone(), shared.clone()), Session::joined(state, shared.clone()));
        hello(&mut a);
        hello(&mut b);
        let (r, _) = reply(&mut a, &Request::AllocBuffer { device: 0, size: 600 }, &[]);
        assert!(matches!(r, Response::Buffer { .. }), "{r:?}");
        let (r, _) = reply(&mut b, &Request::AllocBuffer { device: 0, size: 600 }, &[]);
        assert!(matches!(r, Response::Error(ref m) if m.contains("600 bytes") && m.contains("cap of 1000")), "{r:?}");
        let (r, _) = reply(&mut b, &Request::AllocBuffer { device: 0, size: 400 }, &[]);
        let Response::Buffer { buffer } = r else { panic!("{r:?}") };
        assert_eq!(shared.memory.held(), 1000);
        let (r, _) = reply(&mut b, &Request::FreeBuffer { buffer }, &[]);
        assert_eq!(r, Response::Done);
        assert_eq!(shared.memory.held(), 600);
        // A client that goes away without freeing gives its memory back.
        drop(a);
        assert_eq!(shared.memory.held(), 0);
        let (r, _) = reply(&mut b, &Request::AllocBuffer { device: 0, size: 1000 }, &[]);
        assert!(matches!(r, Response::Buffer { .. }), "{r:?}");
    }

    #[test]
    fn frames_that_do_not_decode_get_an_error_reply() {
        let mut s = Session::new(state());
        for junk in [&[][..], &[1, 0], &[255, 255, 255, 255, 0], &[3, 0, 0, 0, 99, 1, 2]] {
            let out = s.handle_frame(junk);
            let len = u32::from_le_bytes(out[..4].try_into().unwrap()) as usize;
            assert!(matches!(Response::decode(&out[4..4 + len]).unwrap(), Response::Error(_)));
        }
    }
}
