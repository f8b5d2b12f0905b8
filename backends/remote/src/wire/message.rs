//! Requests and responses: one request per QUIC stream, one response back.
//!
//! A message is a `u32` length and that many bytes (at most
//! [`Limits::max_message_bytes`]); its first byte says what it is. Two
//! requests carry raw bytes after the message on the same stream: a write
//! sends `len` bytes after its request, and the response to a read is
//! followed by `len` bytes. Those bytes go straight into (or out of) the
//! buffer in chunks, so no message ever holds a tensor's data.

use super::Limits;
use super::codec::{Reader, WireError, Writer, wire_err};
use super::graph::WireGraph;

/// Length of a content digest (SHA-256).
pub const DIGEST_BYTES: usize = 32;

/// What the server says about one of its devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireDevice {
    /// The device's name on the server (`"CPU"`, `"wgpu0"`).
    pub name: String,
    /// Its description (the CPU or GPU model).
    pub description: String,
    /// [`gantry_engine::DeviceType`] as a code (0 CPU, 1 GPU, 2 IGPU, 3 ACCEL).
    pub device_type: u8,
    /// Free memory in bytes.
    pub memory_free: u64,
    /// Total memory in bytes.
    pub memory_total: u64,
    /// The device's buffer type: tensor alignment in bytes.
    pub alignment: u64,
    /// The device's buffer type: largest buffer in bytes.
    pub max_buffer: u64,
}

/// A request from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Request<'a> {
    /// The first request of a connection: the protocol version the client speaks.
    Hello {
        /// [`super::PROTOCOL_VERSION`] of the client.
        version: u32,
        /// The client's name for itself, for the server's log.
        client: &'a str,
    },
    /// Free and total memory of a device.
    DeviceMemory {
        /// The device's index on the server.
        device: u32,
    },
    /// Whether a device computes the graph's last tensor (its sources are externals).
    SupportsOp {
        /// The device's index.
        device: u32,
        /// The node and its sources, without locations.
        graph: WireGraph<'a>,
    },
    /// A new buffer on a device.
    AllocBuffer {
        /// The device's index.
        device: u32,
        /// Bytes.
        size: u64,
    },
    /// Frees a buffer.
    FreeBuffer {
        /// Its handle.
        buffer: u64,
    },
    /// Sets `len` bytes at `offset` to `value`.
    FillBuffer {
        /// The buffer's handle.
        buffer: u64,
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
        /// The byte value.
        value: u8,
    },
    /// Writes the `len` bytes that follow the request at `offset`.
    WriteBuffer {
        /// The buffer's handle.
        buffer: u64,
        /// First byte.
        offset: u64,
        /// Bytes that follow.
        len: u64,
    },
    /// Reads `len` bytes at `offset` (they follow the response).
    ReadBuffer {
        /// The buffer's handle.
        buffer: u64,
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// Copies between two buffers of this connection.
    CopyBuffer {
        /// Source buffer.
        src: u64,
        /// Source offset.
        src_offset: u64,
        /// Destination buffer.
        dst: u64,
        /// Destination offset.
        dst_offset: u64,
        /// Bytes.
        len: u64,
    },
    /// Writes bytes the server already holds (a model file on its disk),
    /// named by their SHA-256; answered [`Response::Cached`].
    WriteFromCache {
        /// The buffer's handle.
        buffer: u64,
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
        /// SHA-256 of the bytes.
        digest: [u8; DIGEST_BYTES],
    },
    /// Computes the graph's computed tensors, in order, on a device. The
    /// server keeps the graph it built (a few per client), under
    /// [`super::graph_digest`] of the device and graph.
    GraphCompute {
        /// The device's index.
        device: u32,
        /// The split.
        graph: WireGraph<'a>,
    },
    /// Computes again a graph the server built for an earlier
    /// [`Request::GraphCompute`] (a decode step repeats its graph exactly);
    /// answered [`Response::UnknownGraph`] when it no longer holds it.
    GraphComputeAgain {
        /// The device's index.
        device: u32,
        /// [`super::graph_digest`] of the device and graph.
        digest: [u8; DIGEST_BYTES],
    },
}

/// A server's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The handshake's answer.
    Welcome {
        /// The server's protocol version (equal to the client's, or the
        /// handshake would have been an error).
        version: u32,
        /// The server's name for itself.
        server: String,
        /// How many weight tensors the server's cache holds (0: do not ask).
        cached_weights: u64,
        /// The devices served, by index.
        devices: Vec<WireDevice>,
    },
    /// Device memory.
    Memory {
        /// Free bytes.
        free: u64,
        /// Total bytes.
        total: u64,
    },
    /// The answer to [`Request::SupportsOp`].
    Supported(bool),
    /// A new buffer.
    Buffer {
        /// Its handle.
        buffer: u64,
    },
    /// Done (a read's bytes follow).
    Done,
    /// Whether the bytes named by a digest were found and written.
    Cached(bool),
    /// The request was refused or failed; the message says why.
    Error(String),
    /// The graph named by a digest is not held (send it whole).
    UnknownGraph,
}

mod tag {
    pub const HELLO: u8 = 1;
    pub const DEVICE_MEMORY: u8 = 2;
    pub const SUPPORTS_OP: u8 = 3;
    pub const ALLOC_BUFFER: u8 = 4;
    pub const FREE_BUFFER: u8 = 5;
    pub const FILL_BUFFER: u8 = 6;
    pub const WRITE_BUFFER: u8 = 7;
    pub const READ_BUFFER: u8 = 8;
    pub const COPY_BUFFER: u8 = 9;
    pub const WRITE_FROM_CACHE: u8 = 10;
    pub const GRAPH_COMPUTE: u8 = 11;
    pub const GRAPH_COMPUTE_AGAIN: u8 = 12;

    pub const WELCOME: u8 = 101;
    pub const MEMORY: u8 = 102;
    pub const SUPPORTED: u8 = 103;
    pub const BUFFER: u8 = 104;
    pub const DONE: u8 = 105;
    pub const CACHED: u8 = 106;
    pub const ERROR: u8 = 107;
    pub const UNKNOWN_GRAPH: u8 = 108;
}

/// Longest string in a message (names, descriptions, error messages).
const MAX_TEXT: usize = 4096;
/// Most devices one server may describe.
const MAX_DEVICES: usize = 64;

impl Request<'_> {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            Request::Hello { version, client } => {
                w.u8(tag::HELLO);
                w.u32(*version);
                w.str(client);
            }
            Request::DeviceMemory { device } => {
                w.u8(tag::DEVICE_MEMORY);
                w.u32(*device);
            }
            Request::SupportsOp { device, graph } => {
                w.u8(tag::SUPPORTS_OP);
                w.u32(*device);
                graph.write(&mut w);
            }
            Request::AllocBuffer { device, size } => {
                w.u8(tag::ALLOC_BUFFER);
                w.u32(*device);
                w.u64(*size);
            }
            Request::FreeBuffer { buffer } => {
                w.u8(tag::FREE_BUFFER);
                w.u64(*buffer);
            }
            Request::FillBuffer { buffer, offset, len, value } => {
                w.u8(tag::FILL_BUFFER);
                w.u64(*buffer);
                w.u64(*offset);
                w.u64(*len);
                w.u8(*value);
            }
            Request::WriteBuffer { buffer, offset, len } => {
                w.u8(tag::WRITE_BUFFER);
                w.u64(*buffer);
                w.u64(*offset);
                w.u64(*len);
            }
            Request::ReadBuffer { buffer, offset, len } => {
                w.u8(tag::READ_BUFFER);
                w.u64(*buffer);
                w.u64(*offset);
                w.u64(*len);
            }
            Request::CopyBuffer { src, src_offset, dst, dst_offset, len } => {
                w.u8(tag::COPY_BUFFER);
                for v in [*src, *src_offset, *dst, *dst_offset, *len] {
                    w.u64(v);
                }
            }
            Request::WriteFromCache { buffer, offset, len, digest } => {
                w.u8(tag::WRITE_FROM_CACHE);
                w.u64(*buffer);
                w.u64(*offset);
                w.u64(*len);
                w.raw(digest);
            }
            Request::GraphCompute { device, graph } => {
                w.u8(tag::GRAPH_COMPUTE);
                w.u32(*device);
                graph.write(&mut w);
            }
            Request::GraphComputeAgain { device, digest } => {
                w.u8(tag::GRAPH_COMPUTE_AGAIN);
                w.u32(*device);
                w.raw(digest);
            }
        }
        w.into_bytes()
    }
}

impl<'a> Request<'a> {
    /// Decodes one whole message (trailing bytes are an error).
    pub fn decode(bytes: &'a [u8], limits: &Limits) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let request = match r.u8("request kind")? {
            tag::HELLO => Request::Hello { version: r.u32("version")?, client: r.str(MAX_TEXT, "client name")? },
            tag::DEVICE_MEMORY => Request::DeviceMemory { device: r.u32("device")? },
            tag::SUPPORTS_OP => Request::SupportsOp {
                device: r.u32("device")?,
                graph: WireGraph::read(&mut r, limits.max_graph_tensors)?,
            },
            tag::ALLOC_BUFFER => Request::AllocBuffer { device: r.u32("device")?, size: r.u64("size")? },
            tag::FREE_BUFFER => Request::FreeBuffer { buffer: r.u64("buffer")? },
            tag::FILL_BUFFER => Request::FillBuffer {
                buffer: r.u64("buffer")?,
                offset: r.u64("offset")?,
                len: r.u64("length")?,
                value: r.u8("value")?,
            },
            tag::WRITE_BUFFER => {
                Request::WriteBuffer { buffer: r.u64("buffer")?, offset: r.u64("offset")?, len: r.u64("length")? }
            }
            tag::READ_BUFFER => {
                Request::ReadBuffer { buffer: r.u64("buffer")?, offset: r.u64("offset")?, len: r.u64("length")? }
            }
            tag::COPY_BUFFER => Request::CopyBuffer {
                src: r.u64("source buffer")?,
                src_offset: r.u64("source offset")?,
                dst: r.u64("destination buffer")?,
                dst_offset: r.u64("destination offset")?,
                len: r.u64("length")?,
            },
            tag::WRITE_FROM_CACHE => {
                let (buffer, offset, len) = (r.u64("buffer")?, r.u64("offset")?, r.u64("length")?);
                let mut digest = [0u8; DIGEST_BYTES];
                digest.copy_from_slice(r.take(DIGEST_BYTES, "digest")?);
                Request::WriteFromCache { buffer, offset, len, digest }
            }
            tag::GRAPH_COMPUTE => Request::GraphCompute {
                device: r.u32("device")?,
                graph: WireGraph::read(&mut r, limits.max_graph_tensors)?,
            },
            tag::GRAPH_COMPUTE_AGAIN => {
                let device = r.u32("device")?;
                let mut digest = [0u8; DIGEST_BYTES];
                digest.copy_from_slice(r.take(DIGEST_BYTES, "digest")?);
                Request::GraphComputeAgain { device, digest }
            }
            other => return Err(wire_err!("unknown request kind {other}")),
        };
        r.finish("request")?;
        Ok(request)
    }

    /// The request's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::DeviceMemory { .. } => "device memory",
            Request::SupportsOp { .. } => "supports op",
            Request::AllocBuffer { .. } => "alloc buffer",
            Request::FreeBuffer { .. } => "free buffer",
            Request::FillBuffer { .. } => "fill buffer",
            Request::WriteBuffer { .. } => "write buffer",
            Request::ReadBuffer { .. } => "read buffer",
            Request::CopyBuffer { .. } => "copy buffer",
            Request::WriteFromCache { .. } => "write from cache",
            Request::GraphCompute { .. } => "graph compute",
            Request::GraphComputeAgain { .. } => "graph compute again",
        }
    }
}

impl WireDevice {
    fn write(&self, w: &mut Writer) {
        w.str(&self.name);
        w.str(&self.description);
        w.u8(self.device_type);
        w.u64(self.memory_free);
        w.u64(self.memory_total);
        w.u64(self.alignment);
        w.u64(self.max_buffer);
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            name: r.str(MAX_TEXT, "device name")?.to_owned(),
            description: r.str(MAX_TEXT, "device description")?.to_owned(),
            device_type: r.u8("device type")?,
            memory_free: r.u64("free memory")?,
            memory_total: r.u64("total memory")?,
            alignment: r.u64("alignment")?,
            max_buffer: r.u64("largest buffer")?,
        })
    }
}

impl Response {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            Response::Welcome { version, server, cached_weights, devices } => {
                w.u8(tag::WELCOME);
                w.u32(*version);
                w.str(server);
                w.u64(*cached_weights);
                w.u32(devices.len() as u32);
                for d in devices {
                    d.write(&mut w);
                }
            }
            Response::Memory { free, total } => {
                w.u8(tag::MEMORY);
                w.u64(*free);
                w.u64(*total);
            }
            Response::Supported(yes) => {
                w.u8(tag::SUPPORTED);
                w.u8(u8::from(*yes));
            }
            Response::Buffer { buffer } => {
                w.u8(tag::BUFFER);
                w.u64(*buffer);
            }
            Response::Done => w.u8(tag::DONE),
            Response::Cached(yes) => {
                w.u8(tag::CACHED);
                w.u8(u8::from(*yes));
            }
            Response::Error(message) => {
                w.u8(tag::ERROR);
                // Cut at a character boundary so the message stays one string.
                let mut end = message.len().min(MAX_TEXT);
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                w.str(&message[..end]);
            }
            Response::UnknownGraph => w.u8(tag::UNKNOWN_GRAPH),
        }
        w.into_bytes()
    }

    /// Decodes one whole message.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let response = match r.u8("response kind")? {
            tag::WELCOME => {
                let version = r.u32("version")?;
                let server = r.str(MAX_TEXT, "server name")?.to_owned();
                let cached_weights = r.u64("cached weights")?;
                let n = r.count(MAX_DEVICES, 4 + 4 + 1 + 32, "devices")?;
                let mut devices = Vec::with_capacity(n);
                for _ in 0..n {
                    devices.push(WireDevice::read(&mut r)?);
                }
                Response::Welcome { version, server, cached_weights, devices }
            }
            tag::MEMORY => Response::Memory { free: r.u64("free memory")?, total: r.u64("total memory")? },
            tag::SUPPORTED => Response::Supported(r.bool("supported")?),
            tag::BUFFER => Response::Buffer { buffer: r.u64("buffer")? },
            tag::DONE => Response::Done,
            tag::CACHED => Response::Cached(r.bool("cached")?),
            tag::ERROR => Response::Error(r.str(MAX_TEXT, "error message")?.to_owned()),
            tag::UNKNOWN_GRAPH => Response::UnknownGraph,
            other => return Err(wire_err!("unknown response kind {other}")),
        };
        r.finish("response")?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let limits = Limits::default();
        let requests = [
            Request::Hello { version: 1, client: "test" },
            Request::DeviceMemory { device: 2 },
            Request::SupportsOp { device: 0, graph: WireGraph::default() },
            Request::AllocBuffer { device: 0, size: 1 << 40 },
            Request::FreeBuffer { buffer: 9 },
            Request::FillBuffer { buffer: 1, offset: 2, len: 3, value: 0xaa },
            Request::WriteBuffer { buffer: 1, offset: 2, len: 3 },
            Request::ReadBuffer { buffer: 1, offset: 2, len: 3 },
            Request::CopyBuffer { src: 1, src_offset: 2, dst: 3, dst_offset: 4, len: 5 },
            Request::WriteFromCache { buffer: 1, offset: 0, len: 10, digest: [7; DIGEST_BYTES] },
            Request::GraphCompute { device: 1, graph: WireGraph::default() },
            Request::GraphComputeAgain { device: 1, digest: [3; DIGEST_BYTES] },
        ];
        for req in requests {
            let bytes = req.encode();
            assert_eq!(Request::decode(&bytes, &limits).unwrap(), req);
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Request::decode(&longer, &limits).is_err(), "{} with a trailing byte", req.name());
            assert!(Request::decode(&bytes[..bytes.len() - 1], &limits).is_err(), "{} cut short", req.name());
        }
        assert!(Request::decode(&[], &limits).is_err());
        assert!(Request::decode(&[99], &limits).unwrap_err().0.contains("unknown request"));
    }

    #[test]
    fn responses_round_trip() {
        let device = WireDevice {
            name: "CPU".into(),
            description: "a CPU".into(),
            device_type: 0,
            memory_free: 1,
            memory_total: 2,
            alignment: 64,
            max_buffer: u64::MAX,
        };
        let responses = [
            Response::Welcome { version: 1, server: "s".into(), cached_weights: 3, devices: vec![device] },
            Response::Memory { free: 1, total: 2 },
            Response::Supported(true),
            Response::Buffer { buffer: 5 },
            Response::Done,
            Response::Cached(false),
            Response::Error("no such buffer".into()),
            Response::UnknownGraph,
        ];
        for resp in responses {
            assert_eq!(Response::decode(&resp.encode()).unwrap(), resp);
        }
        let long = Response::Error("é".repeat(5000)).encode();
        assert!(matches!(Response::decode(&long).unwrap(), Response::Error(m) if m.len() <= MAX_TEXT));
    }
}
