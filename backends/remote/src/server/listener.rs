//! The server's network side: a QUIC endpoint that accepts authenticated
//! clients, one [`Session`] per connection, one task per stream.
//!
//! A peer whose address QUIC has not validated yet is first sent a retry
//! (so a spoofed address starts nothing), then its TLS handshake runs under
//! [`Limits::handshake_timeout`], at most [`Limits::max_handshakes`] at
//! once; only a finished handshake takes one of the `max_clients` slots, so
//! peers that start handshakes and stall cannot lock real clients out.
//! Each step of a stream (a request arriving, a chunk of a write arriving or
//! of a read leaving) has [`Limits::stream_timeout`], and what arrives is
//! held in a buffer that grows with it ([`Inbox`]). A connection that holds
//! no buffer bytes and runs no stream for [`Limits::unused_timeout`] is closed,
//! so that authenticated peers that only keep connections alive cannot
//! hold every slot.
//!
//! Requests that carry bytes move them in chunks of
//! [`crate::wire::Limits::chunk_bytes`], taking the session's lock
//! per chunk, so other streams of the client (small calls) interleave with a
//! large transfer. Everything else runs on tokio's blocking pool with the
//! session locked, so a compute never stalls the runtime that keeps the
//! connection alive. A bad request gets an error reply on its stream; a
//! stream or a connection that breaks ends only itself.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry_engine::{BackendErrorKind, Error, Result};
use quinn::{RecvStream, SendStream};
use tokio::runtime::Runtime;
use tokio::sync::Mutex;

use super::compute_gate::can_abort;
use super::session::{ServerState, Session};
use super::shared::{Counted, ServerUsage, Shared};
use super::stream_io::Inbox;
use crate::tls::{TlsIdentity, TransportTimes, server_config};
use crate::wire::{Limits, Request, Response};

/// How a server listens.
#[derive(Debug)]
pub struct ListenConfig {
    /// Address and port to bind (port 0 picks one: see [`RunningServer::local_addr`]).
    pub listen: SocketAddr,
    /// The server's certificate and key, and the authority clients must be signed by.
    pub identity: TlsIdentity,
    /// Connection timing.
    pub times: TransportTimes,
    /// Most clients connected at once (counted once their TLS handshake is
    /// done); more are refused.
    pub max_clients: usize,
    /// Worker threads of the network runtime.
    pub worker_threads: usize,
}

/// A server accepting clients on its own runtime until dropped.
pub struct RunningServer {
    endpoint: quinn::Endpoint,
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    accept: Option<tokio::task::JoinHandle<()>>,
    runtime: Option<Runtime>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer").field("local_addr", &self.local_addr).finish()
    }
}

impl RunningServer {
    /// Binds `config.listen` and starts accepting clients for `state`'s devices.
    pub fn start(config: ListenConfig, state: ServerState) -> Result<Self> {
        // Every step here is the operating system's socket or threads: an
        // I/O error of the server's transport.
        let fail = |what: &str, e: std::io::Error| {
            Error::backend_with_source("rpc-server", BackendErrorKind::Transport, format!("{what}: {e}"), e)
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads.max(1))
            .thread_name("gantry-rpc-server")
            .enable_all()
            .build()
            .map_err(|e| fail("starting the runtime", e))?;
        let quic = server_config(&config.identity, config.times)?;
        let endpoint = {
            let _entered = runtime.enter();
            quinn::Endpoint::server(quic, config.listen).map_err(|e| fail(&format!("binding {}", config.listen), e))?
        };
        let local_addr = endpoint.local_addr().map_err(|e| fail("reading the bound address", e))?;
        for d in state.devices.iter().filter(|d| !can_abort(d.backend.as_ref())) {
            tracing::warn!(
                device = d.device.name(),
                "this backend has no abort callback: its computes run to their end, past --compute-timeout"
            );
        }
        let shared = Arc::new(Shared::new(&state));
        let state = Arc::new(state);
        let accept = runtime.spawn(accept_clients(endpoint.clone(), state, shared.clone(), config.max_clients.max(1)));
        Ok(Self { endpoint, shared, local_addr, accept: Some(accept), runtime: Some(runtime) })
    }

    /// What the server holds now: clients, handshakes, memory, stream bytes.
    pub fn usage(&self) -> ServerUsage {
        self.shared.usage()
    }

    /// The address the server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Blocks the calling thread while the server runs (until the process ends).
    pub fn wait(mut self) {
        if let (Some(runtime), Some(accept)) = (self.runtime.as_ref(), self.accept.take()) {
            let _ = runtime.block_on(accept);
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.endpoint.close(0u32.into(), b"server stopping");
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn clients_of(shared: &Shared) -> &std::sync::atomic::AtomicUsize {
    &shared.clients
}

fn handshakes_of(shared: &Shared) -> &std::sync::atomic::AtomicUsize {
    &shared.handshakes
}

async fn accept_clients(endpoint: quinn::Endpoint, state: Arc<ServerState>, shared: Arc<Shared>, max_clients: usize) {
    let limits = state.limits;
    while let Some(incoming) = endpoint.accept().await {
        let peer = incoming.remote_address();
        // A retry proves the peer receives at its address before the server
        // keeps any state for it (a retry costs the server nothing).
        if !incoming.remote_address_validated() && incoming.may_retry() {
            if let Err(e) = incoming.retry() {
                e.into_incoming().ignore();
            }
            continue;
        }
        let Some(handshake) = Counted::take(&shared, handshakes_of, limits.max_handshakes.max(1)) else {
            tracing::warn!(%peer, max_handshakes = limits.max_handshakes, "refused: too many handshakes under way");
            incoming.refuse();
            continue;
        };
        let (state, shared) = (state.clone(), shared.clone());
        tokio::spawn(async move {
            let conn = match tokio::time::timeout(limits.handshake_timeout, incoming).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    // A client without a certificate from the configured authority ends here.
                    tracing::warn!(%peer, error = %e, "refused: the TLS handshake failed");
                    return;
                }
                Err(_) => {
                    // Dropping the handshake closes the connection.
                    tracing::warn!(%peer, timeout_s = limits.handshake_timeout.as_secs_f64(), "refused: the TLS handshake stalled");
                    return;
                }
            };
            drop(handshake);
            let Some(slot) = Counted::take(&shared, clients_of, max_clients) else {
                tracing::warn!(%peer, max_clients, "refused: too many clients");
                conn.close(1u32.into(), b"too many clients");
                return;
            };
            serve_connection(conn, peer, state, shared).await;
            drop(slot);
        });
    }
}

async fn serve_connection(conn: quinn::Connection, peer: SocketAddr, state: Arc<ServerState>, shared: Arc<Shared>) {
    tracing::info!(%peer, "client connected");
    let limits = state.limits;
    let session = Arc::new(Mutex::new(Session::joined(state, shared.clone())));
    let activity = Arc::new(Activity::new());
    let mut accept = Box::pin(conn.accept_bi());
    loop {
        tokio::select! {
            accepted = &mut accept => match accepted {
                Ok((send, recv)) => {
                    accept = Box::pin(conn.accept_bi());
                    let (session, shared, activity) = (session.clone(), shared.clone(), activity.clone());
                    activity.start();
                    tokio::spawn(async move {
                        serve_stream(send, recv, session, shared, limits).await;
                        activity.end();
                    });
                }
                Err(e) => {
                    tracing::info!(%peer, reason = %e, "client gone");
                    break;
                }
            },
            () = tokio::time::sleep(limits.unused_timeout / 4) => {
                // No stream under way: the session is not locked, unless a
                // stream's end has not been counted yet (then it is in use).
                // Buffers of 0 bytes hold nothing: they would keep a slot for free.
                let holds_nothing = activity.idle() && session.try_lock().is_ok_and(|s| s.buffer_bytes() == 0);
                if !holds_nothing {
                    activity.touch();
                } else if activity.since_last() >= limits.unused_timeout {
                    tracing::warn!(
                        %peer,
                        unused_timeout_s = limits.unused_timeout.as_secs_f64(),
                        "closed: the connection held no buffer and sent no request (--unused-timeout)"
                    );
                    conn.close(2u32.into(), b"unused: no buffer and no request within --unused-timeout");
                    break;
                }
            }
        }
    }
}

/// A connection's streams under way and when it last did anything, for
/// [`Limits::unused_timeout`].
struct Activity {
    streams: std::sync::atomic::AtomicUsize,
    last: std::sync::Mutex<Instant>,
}

impl Activity {
    fn new() -> Self {
        Self { streams: 0.into(), last: std::sync::Mutex::new(Instant::now()) }
    }

    fn start(&self) {
        self.streams.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.touch();
    }

    fn end(&self) {
        self.touch();
        self.streams.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn touch(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn idle(&self) -> bool {
        self.streams.load(std::sync::atomic::Ordering::SeqCst) == 0
    }

    fn since_last(&self) -> Duration {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).elapsed()
    }
}

/// Reads one request message: its `u32` length, then as many bytes, all
/// within the stream timeout.
async fn read_message(recv: &mut RecvStream, inbox: &mut Inbox, limits: &Limits) -> std::result::Result<(), String> {
    let deadline = Instant::now() + limits.stream_timeout;
    inbox.fill(recv, 4, deadline).await.map_err(|e| format!("reading a request's length: {e}"))?;
    let len = u32::from_le_bytes(inbox.bytes().try_into().map_err(|_| "a request's length".to_owned())?) as usize;
    if len > limits.max_message_bytes {
        return Err(format!("a request of {len} bytes is over the limit of {}", limits.max_message_bytes));
    }
    inbox.clear();
    inbox.fill(recv, len, deadline).await.map_err(|e| format!("reading a request of {len} bytes: {e}"))
}

/// `write` bounded by the stream timeout.
async fn timed<T>(
    timeout: Duration,
    write: impl Future<Output = std::result::Result<T, quinn::WriteError>>,
) -> std::result::Result<T, String> {
    match tokio::time::timeout(timeout, write).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("the peer took nothing for {:.1} s (--stream-timeout)", timeout.as_secs_f64())),
    }
}

async fn reply(send: &mut SendStream, response: &Response, timeout: Duration) -> std::result::Result<(), String> {
    let message = response.encode();
    let mut frame = Vec::with_capacity(4 + message.len());
    frame.extend_from_slice(&(message.len() as u32).to_le_bytes());
    frame.extend_from_slice(&message);
    timed(timeout, send.write_all(&frame)).await
}

/// Tells the client to stop sending a write's bytes we will not read.
fn refuse_rest(recv: &mut RecvStream) {
    let _ = recv.stop(0u32.into());
}

async fn serve_stream(
    mut send: SendStream,
    mut recv: RecvStream,
    session: Arc<Mutex<Session>>,
    shared: Arc<Shared>,
    limits: Limits,
) {
    let timeout = limits.stream_timeout;
    let mut inbox = Inbox::new(shared.clone());
    if let Err(e) = read_message(&mut recv, &mut inbox, &limits).await {
        refuse_rest(&mut recv);
        // What arrived is freed before the (bounded) reply.
        drop(inbox);
        if reply(&mut send, &Response::Error(e), timeout).await.is_ok() {
            let _ = send.finish();
        }
        return;
    }
    let outcome = match Request::decode(inbox.bytes(), &limits) {
        Err(e) => {
            refuse_rest(&mut recv);
            reply(&mut send, &Response::Error(format!("bad request: {e}")), timeout).await
        }
        Ok(Request::WriteBuffer { buffer, offset, len }) => {
            drop(inbox);
            let response = receive_write(&mut recv, &session, &shared, &limits, buffer, offset, len).await;
            reply(&mut send, &response, timeout).await
        }
        Ok(Request::ReadBuffer { buffer, offset, len }) => {
            drop(inbox);
            send_read(&mut send, &session, &limits, buffer, offset, len).await
        }
        Ok(_) => {
            // Decoded again on the blocking pool, which needs the bytes it works on to itself.
            let guard = session.clone().lock_owned().await;
            let handled = tokio::task::spawn_blocking(move || {
                let mut session = guard;
                let limits = *session.limits();
                match Request::decode(inbox.bytes(), &limits) {
                    Ok(request) => session.handle(&request),
                    Err(e) => Response::Error(format!("bad request: {e}")),
                }
            })
            .await;
            let response = handled.unwrap_or_else(|_| Response::Error("the server failed on this request".into()));
            reply(&mut send, &response, timeout).await
        }
    };
    match outcome {
        Ok(()) => {
            let _ = send.finish();
        }
        Err(e) => {
            tracing::debug!(error = %e, "a stream ended early");
            let _ = send.reset(1u32.into());
        }
    }
}

async fn receive_write(
    recv: &mut RecvStream,
    session: &Mutex<Session>,
    shared: &Arc<Shared>,
    limits: &Limits,
    buffer: u64,
    offset: u64,
    len: u64,
) -> Response {
    if let Err(e) = session.lock().await.check_transfer(buffer, offset, len) {
        refuse_rest(recv);
        return Response::Error(format!("write buffer: {e}"));
    }
    // Bounded by the chunk size, whatever the request says, and grown only
    // as the bytes arrive.
    let chunk = limits.chunk_bytes.max(1);
    let mut bytes = Inbox::new(shared.clone());
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(chunk as u64) as usize;
        bytes.clear();
        if let Err(e) = bytes.fill(recv, n, Instant::now() + limits.stream_timeout).await {
            refuse_rest(recv);
            return Response::Error(format!("write buffer: the bytes stopped after {done} of {len}: {e}"));
        }
        if let Err(e) = session.lock().await.write(buffer, offset + done, bytes.bytes()) {
            refuse_rest(recv);
            return Response::Error(format!("write buffer: {e}"));
        }
        done += n as u64;
    }
    Response::Done
}

async fn send_read(
    send: &mut SendStream,
    session: &Mutex<Session>,
    limits: &Limits,
    buffer: u64,
    offset: u64,
    len: u64,
) -> std::result::Result<(), String> {
    let timeout = limits.stream_timeout;
    if let Err(e) = session.lock().await.check_transfer(buffer, offset, len) {
        return reply(send, &Response::Error(format!("read buffer: {e}")), timeout).await;
    }
    reply(send, &Response::Done, timeout).await?;
    // The range lies in a buffer the client holds: these bytes exist already.
    let chunk = limits.chunk_bytes.max(1);
    let mut bytes = vec![0u8; chunk.min(usize::try_from(len).unwrap_or(chunk))];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(chunk as u64) as usize;
        if session.lock().await.read(buffer, offset + done, &mut bytes[..n]).is_err() {
            // The buffer went away under the read (freed by another stream):
            // the client sees the stream reset instead of wrong bytes.
            return Err(format!("buffer {buffer} went away during a read"));
        }
        timed(timeout, send.write_all(&bytes[..n])).await?;
        done += n as u64;
    }
    Ok(())
}
