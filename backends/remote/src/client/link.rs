//! The client's link to one server: one QUIC connection, opened on first
//! use, with a stream per call.
//!
//! Every call is bounded in time: each step of it (opening its stream,
//! sending a chunk, waiting for the answer, receiving a chunk) must make
//! progress within the call timeout (a compute's answer within the compute
//! timeout), and the connection itself is lost when nothing is heard from
//! the server for the transport's idle timeout (the server sends
//! keep-alives while it computes), which ends every call waiting on it. A call that fails in
//! transport marks the connection lost; objects made over it (buffers)
//! remember the connection's *generation* and say so when used afterwards,
//! while the next call that needs no old object dials again. A server's
//! error reply is an `Err` for that call only.
//!
//! Calls block the calling thread (the traits are synchronous); the I/O runs
//! on the platform's tokio runtime.

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use gantry_engine::{BackendErrorKind, Error, Result};
use tokio::runtime::Runtime;

use crate::wire::{Limits, PROTOCOL_VERSION, Request, Response, WireDevice};

/// The largest buffer alignment a server may announce for a device (a
/// page of the largest huge pages): beyond it, rounding a tensor's offset
/// up to it overflowed to an alignment of 0.
const MAX_ALIGNMENT: u64 = 1 << 30;

/// Refuses devices a server announced that this client cannot use as told.
fn check_announced(devices: &[WireDevice]) -> std::result::Result<(), String> {
    match devices.iter().find(|d| d.alignment > MAX_ALIGNMENT) {
        Some(d) => Err(format!(
            "the server announced device {} with a buffer alignment of {} bytes (at most {MAX_ALIGNMENT} are taken)",
            d.name, d.alignment
        )),
        None => Ok(()),
    }
}

/// What the server said in the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    /// The server's name for itself.
    pub server: String,
    /// Entries of its weight cache.
    pub cached_weights: u64,
    /// Its devices, by index.
    pub devices: Vec<WireDevice>,
}

enum State {
    Up { conn: quinn::Connection, generation: u64 },
    Down { generation: u64, reason: String },
}

/// Bytes sent and received over a link's connections, as UDP payload (QUIC
/// headers, acknowledgements and TLS included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireBytes {
    /// Sent to the server.
    pub sent: u64,
    /// Received from it.
    pub received: u64,
}

/// How long a call may wait for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallTimeouts {
    /// Each step of a call (a stream opened, a chunk sent or received, an answer).
    pub call: Duration,
    /// The answer to a graph compute (the server is alive meanwhile: its
    /// keep-alives hold the connection, whose idle timeout notices a death).
    pub compute: Duration,
}

/// A link to one server.
pub struct Link {
    address: String,
    socket: SocketAddr,
    server_name: String,
    runtime: Arc<Runtime>,
    endpoint: quinn::Endpoint,
    config: quinn::ClientConfig,
    call_timeout: Duration,
    compute_timeout: Duration,
    limits: Limits,
    welcome: Welcome,
    state: Mutex<State>,
    /// Bytes of connections already closed.
    closed_bytes: Mutex<WireBytes>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("address", &self.address).field("server", &self.welcome.server).finish()
    }
}

/// One step of a call, bounded by `timeout`.
async fn step<T, E: std::fmt::Display>(
    timeout: Duration,
    what: &str,
    fut: impl Future<Output = std::result::Result<T, E>>,
) -> std::result::Result<T, String> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: nothing for {:.1} s", timeout.as_secs_f64())),
    }
}

/// A transfer's raw bytes: sent after the request, or received after the response.
enum Payload<'a> {
    None,
    Upload(&'a [u8]),
    Download(&'a mut [u8]),
}

/// One request and its response on a new stream of `conn`.
async fn exchange(
    conn: &quinn::Connection,
    request: &[u8],
    payload: Payload<'_>,
    timeout: Duration,
    answer_timeout: Duration,
    limits: &Limits,
) -> std::result::Result<Response, String> {
    let (mut send, mut recv) = step(timeout, "opening a stream", conn.open_bi()).await?;
    let mut head = Vec::with_capacity(4 + request.len());
    head.extend_from_slice(&(request.len() as u32).to_le_bytes());
    head.extend_from_slice(request);
    step(timeout, "sending a request", send.write_all(&head)).await?;
    let mut download = None;
    match payload {
        Payload::None => {}
        Payload::Upload(data) => {
            for chunk in data.chunks(limits.chunk_bytes.max(1)) {
                match tokio::time::timeout(timeout, send.write_all(chunk)).await {
                    Ok(Ok(())) => {}
                    // The server refused the write and said why in its response.
                    Ok(Err(quinn::WriteError::Stopped(_))) => break,
                    Ok(Err(e)) => return Err(format!("sending bytes: {e}")),
                    Err(_) => return Err(format!("sending bytes: nothing for {:.1} s", timeout.as_secs_f64())),
                }
            }
        }
        Payload::Download(out) => download = Some(out),
    }
    // The server may have stopped reading already (an early refusal): then the stream is done anyway.
    let _ = send.finish();
    let mut len = [0u8; 4];
    step(answer_timeout, "waiting for the answer", recv.read_exact(&mut len)).await?;
    let len = u32::from_le_bytes(len) as usize;
    if len > limits.max_message_bytes {
        return Err(format!("an answer of {len} bytes is larger than any message"));
    }
    let mut message = vec![0u8; len];
    step(timeout, "reading the answer", recv.read_exact(&mut message)).await?;
    let response = Response::decode(&message).map_err(|e| format!("a malformed answer: {e}"))?;
    if let (Response::Done, Some(out)) = (&response, download) {
        for chunk in out.chunks_mut(limits.chunk_bytes.max(1)) {
            step(timeout, "receiving bytes", recv.read_exact(chunk)).await?;
        }
    }
    Ok(response)
}

/// `reason` with why the server closed `conn`, if it did (a server that
/// refuses a client after the handshake, "too many clients", says so only
/// in its close).
fn with_close_reason(conn: &quinn::Connection, reason: String) -> String {
    match conn.close_reason() {
        Some(close) => format!("{reason} ({close})"),
        None => reason,
    }
}

/// Splits `host:port` into the host (without IPv6 brackets) for the TLS name.
fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

impl Link {
    /// Dials `address` (`host:port`) and says hello; the server's certificate
    /// must name `host`. Each step of a call waits at most `timeouts.call`,
    /// the answer to a compute at most `timeouts.compute`.
    pub fn connect(
        address: &str,
        runtime: Arc<Runtime>,
        config: quinn::ClientConfig,
        timeouts: CallTimeouts,
        limits: Limits,
    ) -> Result<Arc<Self>> {
        let backend = format!("remote {address}");
        let fail = |reason: String, e: std::io::Error| {
            Error::backend_with_source(backend.clone(), BackendErrorKind::Transport, reason, e)
        };
        let socket = address
            .to_socket_addrs()
            .map_err(|e| fail(format!("cannot resolve the address: {e}"), e))?
            .next()
            .ok_or_else(|| {
                Error::backend(backend.clone(), BackendErrorKind::Transport, "the address resolves to nothing")
            })?;
        let bind: SocketAddr = if socket.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
        let endpoint = {
            let _entered = runtime.enter();
            quinn::Endpoint::client(bind).map_err(|e| fail(format!("cannot open a UDP socket: {e}"), e))?
        };
        let mut link = Self {
            address: address.to_owned(),
            socket,
            server_name: host_of(address).to_owned(),
            runtime,
            endpoint,
            config,
            call_timeout: timeouts.call,
            compute_timeout: timeouts.compute,
            limits,
            welcome: Welcome { server: String::new(), cached_weights: 0, devices: Vec::new() },
            state: Mutex::new(State::Down { generation: 0, reason: "not connected yet".into() }),
            closed_bytes: Mutex::new(WireBytes::default()),
        };
        let (conn, welcome) = link.dial()?;
        link.welcome = welcome;
        *link.state.get_mut().unwrap_or_else(|p| p.into_inner()) = State::Up { conn, generation: 1 };
        Ok(Arc::new(link))
    }

    /// The address dialled.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// What the server said when first dialled.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// The limits this link keeps to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// An error of this link's server, of `kind`.
    fn error(&self, kind: BackendErrorKind, reason: String) -> Error {
        Error::backend(format!("remote {}", self.address), kind, reason)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `fut` on the runtime and waits for it on this thread.
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> Result<T> {
        let handle = self.runtime.handle();
        // tokio refuses to block a thread that is running async tasks; that
        // is a caller's mistake to report, not a reason to unwind through it.
        catch_unwind(AssertUnwindSafe(|| handle.block_on(fut))).map_err(|_| {
            let reason = "a remote call blocks: make it from a plain thread, not from an async task";
            self.error(BackendErrorKind::Other, reason.into())
        })
    }

    /// A new connection and its handshake.
    fn dial(&self) -> Result<(quinn::Connection, Welcome)> {
        let timeout = self.call_timeout;
        let hello = Request::Hello { version: PROTOCOL_VERSION, client: "gantry" }.encode();
        let limits = self.limits;
        let result = self.block_on(async {
            let connecting = self
                .endpoint
                .connect_with(self.config.clone(), self.socket, &self.server_name)
                .map_err(|e| format!("cannot connect: {e}"))?;
            let conn = step(timeout, "TLS handshake", connecting).await?;
            let response = exchange(&conn, &hello, Payload::None, timeout, timeout, &limits)
                .await
                .map_err(|e| with_close_reason(&conn, e));
            Ok::<_, String>((conn, response))
        })?;
        let (conn, response) = result.map_err(|e| self.error(BackendErrorKind::Transport, e))?;
        match response {
            Ok(Response::Welcome { version, server, cached_weights, devices }) if version == PROTOCOL_VERSION => {
                if let Err(reason) = check_announced(&devices) {
                    conn.close(0u32.into(), b"handshake failed");
                    return Err(self.error(BackendErrorKind::Protocol, reason));
                }
                Ok((conn, Welcome { server, cached_weights, devices }))
            }
            Ok(Response::Error(message)) => {
                conn.close(0u32.into(), b"handshake refused");
                Err(self.error(BackendErrorKind::Protocol, format!("the server refused the handshake: {message}")))
            }
            Ok(other) => {
                conn.close(0u32.into(), b"handshake failed");
                Err(self.error(BackendErrorKind::Protocol, format!("the server answered hello with {other:?}")))
            }
            Err(e) => Err(self.error(BackendErrorKind::Transport, e)),
        }
    }

    /// The current connection's generation, dialling again when it was lost.
    pub fn generation(&self) -> Result<u64> {
        self.connection(None).map(|(_, g)| g)
    }

    /// The connection to use: the current one when it is up (and of
    /// generation `expected`, if given), else a new one (only when no
    /// generation is expected: objects of a lost connection are gone).
    fn connection(&self, expected: Option<u64>) -> Result<(quinn::Connection, u64)> {
        // A connection the server closed (one left holding nothing past its
        // `--unused-timeout`) is dialled again before a call that needs none
        // of its objects, rather than failing that call first.
        if expected.is_none() {
            let closed = match &*self.lock() {
                State::Up { conn, generation } => conn.close_reason().map(|r| (*generation, r.to_string())),
                State::Down { .. } => None,
            };
            if let Some((generation, reason)) = closed {
                self.lose(generation, &reason);
            }
        }
        let mut state = self.lock();
        match (&*state, expected) {
            (State::Up { conn, generation }, None) => return Ok((conn.clone(), *generation)),
            (State::Up { conn, generation }, Some(g)) if *generation == g => return Ok((conn.clone(), g)),
            (State::Up { .. }, Some(_)) | (State::Down { .. }, Some(_)) => {
                return Err(self.error(
                    BackendErrorKind::Transport,
                    "the connection this object was made on was lost, and the object with it: make it again".into(),
                ));
            }
            (State::Down { .. }, None) => {}
        }
        let State::Down { generation, .. } = &*state else {
            return Err(self.error(BackendErrorKind::Other, "connection state changed while dialling".into()));
        };
        let next = generation + 1;
        let (conn, welcome) = self.dial()?;
        if welcome.devices.iter().map(|d| &d.name).ne(self.welcome.devices.iter().map(|d| &d.name)) {
            conn.close(0u32.into(), b"devices changed");
            return Err(self.error(
                BackendErrorKind::Protocol,
                format!(
                    "the server now serves other devices than when first dialled ({} instead of {})",
                    welcome.devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "),
                    self.welcome.devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        tracing::info!(server = %self.address, generation = next, "reconnected");
        *state = State::Up { conn: conn.clone(), generation: next };
        Ok((conn, next))
    }

    /// Marks generation `generation` lost (if it is still the current one).
    fn lose(&self, generation: u64, reason: &str) {
        let mut state = self.lock();
        if let State::Up { conn, generation: g } = &*state
            && *g == generation
        {
            let stats = conn.stats();
            {
                let mut closed = self.closed_bytes.lock().unwrap_or_else(|p| p.into_inner());
                closed.sent += stats.udp_tx.bytes;
                closed.received += stats.udp_rx.bytes;
            }
            conn.close(0u32.into(), b"call failed");
            tracing::warn!(server = %self.address, reason, "connection lost");
            *state = State::Down { generation, reason: reason.to_owned() };
        }
    }

    fn call_with(&self, expected: Option<u64>, request: &Request<'_>, payload: Payload<'_>) -> Result<Response> {
        let (conn, generation) = self.connection(expected)?;
        let bytes = request.encode();
        if bytes.len() > self.limits.max_message_bytes {
            return Err(self.error(
                BackendErrorKind::Unsupported,
                format!(
                    "{}: a message of {} bytes is over the limit of {}",
                    request.name(),
                    bytes.len(),
                    self.limits.max_message_bytes
                ),
            ));
        }
        // A compute may take long; a server that died meanwhile is noticed by the idle timeout.
        let answer_timeout = match request {
            Request::GraphCompute { .. } => self.compute_timeout.max(self.call_timeout),
            _ => self.call_timeout,
        };
        let outcome =
            self.block_on(exchange(&conn, &bytes, payload, self.call_timeout, answer_timeout, &self.limits))?;
        match outcome {
            // The server's own error: its kind is not on the wire.
            Ok(Response::Error(message)) => {
                Err(self.error(BackendErrorKind::Other, format!("{}: {message}", request.name())))
            }
            Ok(response) => Ok(response),
            Err(reason) => {
                let reason = with_close_reason(&conn, reason);
                self.lose(generation, &reason);
                Err(self.error(
                    BackendErrorKind::Transport,
                    format!("{}: {reason}; the connection is closed, and what was made on it is gone", request.name()),
                ))
            }
        }
    }

    /// A call that needs no object of an earlier connection (dials again if needed).
    pub fn call(&self, request: &Request<'_>) -> Result<Response> {
        self.call_with(None, request, Payload::None)
    }

    /// A call about objects made on connection `generation`.
    pub fn call_on(&self, generation: u64, request: &Request<'_>) -> Result<Response> {
        self.call_with(Some(generation), request, Payload::None)
    }

    /// A write: `request` then `data`, on connection `generation`.
    pub fn upload(&self, generation: u64, request: &Request<'_>, data: &[u8]) -> Result<Response> {
        self.call_with(Some(generation), request, Payload::Upload(data))
    }

    /// A read: `request`, then the response and `out.len()` bytes into `out`.
    pub fn download(&self, generation: u64, request: &Request<'_>, out: &mut [u8]) -> Result<Response> {
        self.call_with(Some(generation), request, Payload::Download(out))
    }

    /// Sends `request` without waiting for it (freeing a dropped buffer):
    /// nothing when connection `generation` is gone, since the server freed
    /// everything of it then.
    pub fn send_and_forget(&self, generation: u64, request: &Request<'_>) {
        let conn = match &*self.lock() {
            State::Up { conn, generation: g } if *g == generation => conn.clone(),
            _ => return,
        };
        let bytes = request.encode();
        let (timeout, limits) = (self.call_timeout, self.limits);
        self.runtime.spawn(async move {
            let _ = exchange(&conn, &bytes, Payload::None, timeout, timeout, &limits).await;
        });
    }

    /// Bytes on the wire so far, over every connection of this link.
    pub fn wire_bytes(&self) -> WireBytes {
        let closed = *self.closed_bytes.lock().unwrap_or_else(|p| p.into_inner());
        match &*self.lock() {
            State::Up { conn, .. } => {
                let s = conn.stats();
                WireBytes { sent: closed.sent + s.udp_tx.bytes, received: closed.received + s.udp_rx.bytes }
            }
            State::Down { .. } => closed,
        }
    }

    /// Why the connection is down, or `None` when it is up.
    pub fn lost_reason(&self) -> Option<String> {
        match &*self.lock() {
            State::Up { .. } => None,
            State::Down { reason, .. } => Some(reason.clone()),
        }
    }
}

/// How long a link that is dropped waits for its close to reach the server.
const CLOSE_FLUSH: Duration = Duration::from_millis(500);

impl Drop for Link {
    fn drop(&mut self) {
        if let State::Up { conn, .. } = &*self.lock() {
            conn.close(0u32.into(), b"client done");
        } else {
            return;
        }
        // `close` only queues the close frame: a process that exits right
        // after (a `gantry run` that is done) would leave the server to
        // notice the silence at its idle timeout, holding a --max-clients
        // slot meanwhile. Wait, briefly, until the endpoint has sent it and
        // its connection is drained — unless this drop runs inside an async
        // task, which must not block.
        if tokio::runtime::Handle::try_current().is_err() {
            let endpoint = self.endpoint.clone();
            let _ = self.block_on(async move { tokio::time::timeout(CLOSE_FLUSH, endpoint.wait_idle()).await });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_ALIGNMENT, check_announced, host_of};
    use crate::wire::WireDevice;

    /// A server announcing an alignment past 2^63 made the client's rounding
    /// wrap to 0, and the load failed naming an alignment nobody announced.
    #[test]
    fn an_alignment_past_the_bound_is_refused_naming_the_device() {
        let device = |alignment| WireDevice {
            name: "CPU".into(),
            description: "a CPU".into(),
            device_type: 0,
            memory_free: 1,
            memory_total: 2,
            alignment,
            max_buffer: u64::MAX,
        };
        check_announced(&[device(64), device(MAX_ALIGNMENT)]).unwrap();
        let e = check_announced(&[device(64), device((1 << 63) + 1)]).unwrap_err();
        assert!(e.contains("device CPU with a buffer alignment of 9223372036854775809 bytes"), "{e}");
    }

    #[test]
    fn tls_names_are_the_host_part() {
        assert_eq!(host_of("127.0.0.1:5000"), "127.0.0.1");
        assert_eq!(host_of("gpu-box.lan:7000"), "gpu-box.lan");
        assert_eq!(host_of("[::1]:5000"), "::1");
    }
}
