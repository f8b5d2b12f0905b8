//! The server's network side: a QUIC endpoint that accepts authenticated
//! clients, one [`Session`] per connection, one task per stream.
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
use std::sync::atomic::{AtomicUsize, Ordering};

use gantry_engine::{BackendErrorKind, Error, Result};
use quinn::{RecvStream, SendStream};
use tokio::runtime::Runtime;
use tokio::sync::Mutex;

use super::session::{ServerState, Session};
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
    /// Most clients connected at once; more are refused.
    pub max_clients: usize,
    /// Worker threads of the network runtime.
    pub worker_threads: usize,
}

/// A server accepting clients on its own runtime until dropped.
pub struct RunningServer {
    endpoint: quinn::Endpoint,
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
        let state = Arc::new(state);
        let accept = runtime.spawn(accept_clients(endpoint.clone(), state, config.max_clients.max(1)));
        Ok(Self { endpoint, local_addr, accept: Some(accept), runtime: Some(runtime) })
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

/// Decrements the client count when a connection's task ends, however it ends.
struct ClientSlot(Arc<AtomicUsize>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn accept_clients(endpoint: quinn::Endpoint, state: Arc<ServerState>, max_clients: usize) {
    let clients = Arc::new(AtomicUsize::new(0));
    while let Some(incoming) = endpoint.accept().await {
        if clients.fetch_add(1, Ordering::SeqCst) >= max_clients {
            clients.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(peer = %incoming.remote_address(), max_clients, "refused: too many clients");
            incoming.refuse();
            continue;
        }
        let slot = ClientSlot(clients.clone());
        let state = state.clone();
        tokio::spawn(async move {
            let _slot = slot;
            serve_connection(incoming, state).await;
        });
    }
}

async fn serve_connection(incoming: quinn::Incoming, state: Arc<ServerState>) {
    let peer = incoming.remote_address();
    let conn = match incoming.await {
        Ok(c) => c,
        Err(e) => {
            // A client without a certificate from the configured authority ends here.
            tracing::warn!(%peer, error = %e, "refused: the TLS handshake failed");
            return;
        }
    };
    tracing::info!(%peer, "client connected");
    let limits = state.limits;
    let session = Arc::new(Mutex::new(Session::new(state)));
    loop {
        match conn.accept_bi().await {
            Ok((send, recv)) => {
                let session = session.clone();
                tokio::spawn(async move { serve_stream(send, recv, session, limits).await });
            }
            Err(e) => {
                tracing::info!(%peer, reason = %e, "client gone");
                break;
            }
        }
    }
}

async fn read_message(recv: &mut RecvStream, limits: &Limits) -> std::result::Result<Vec<u8>, String> {
    let mut len = [0u8; 4];
    recv.read_exact(&mut len).await.map_err(|e| format!("reading a request: {e}"))?;
    let len = u32::from_le_bytes(len) as usize;
    if len > limits.max_message_bytes {
        return Err(format!("a request of {len} bytes is over the limit of {}", limits.max_message_bytes));
    }
    let mut message = vec![0u8; len];
    recv.read_exact(&mut message).await.map_err(|e| format!("reading a request: {e}"))?;
    Ok(message)
}

async fn reply(send: &mut SendStream, response: &Response) -> std::result::Result<(), quinn::WriteError> {
    let message = response.encode();
    send.write_all(&(message.len() as u32).to_le_bytes()).await?;
    send.write_all(&message).await
}

/// Tells the client to stop sending a write's bytes we will not read.
fn refuse_rest(recv: &mut RecvStream) {
    let _ = recv.stop(0u32.into());
}

async fn serve_stream(mut send: SendStream, mut recv: RecvStream, session: Arc<Mutex<Session>>, limits: Limits) {
    let message = match read_message(&mut recv, &limits).await {
        Ok(m) => m,
        Err(e) => {
            refuse_rest(&mut recv);
            let _ = reply(&mut send, &Response::Error(e)).await;
            let _ = send.finish();
            return;
        }
    };
    let outcome = match Request::decode(&message, &limits) {
        Err(e) => {
            refuse_rest(&mut recv);
            reply(&mut send, &Response::Error(format!("bad request: {e}"))).await
        }
        Ok(Request::WriteBuffer { buffer, offset, len }) => {
            let response = receive_write(&mut recv, &session, &limits, buffer, offset, len).await;
            reply(&mut send, &response).await
        }
        Ok(Request::ReadBuffer { buffer, offset, len }) => {
            send_read(&mut send, &session, &limits, buffer, offset, len).await
        }
        Ok(_) => {
            // Decoded again on the blocking pool, which needs the bytes it works on to itself.
            let guard = session.clone().lock_owned().await;
            let handled = tokio::task::spawn_blocking(move || {
                let mut session = guard;
                let limits = *session.limits();
                match Request::decode(&message, &limits) {
                    Ok(request) => session.handle(&request),
                    Err(e) => Response::Error(format!("bad request: {e}")),
                }
            })
            .await;
            let response = handled.unwrap_or_else(|_| Response::Error("the server failed on this request".into()));
            reply(&mut send, &response).await
        }
    };
    if outcome.is_ok() {
        let _ = send.finish();
    }
}

async fn receive_write(
    recv: &mut RecvStream,
    session: &Mutex<Session>,
    limits: &Limits,
    buffer: u64,
    offset: u64,
    len: u64,
) -> Response {
    if let Err(e) = session.lock().await.check_transfer(buffer, offset, len) {
        refuse_rest(recv);
        return Response::Error(format!("write buffer: {e}"));
    }
    // Bounded by the chunk size, whatever the request says.
    let chunk = limits.chunk_bytes.max(1);
    let mut bytes = vec![0u8; chunk.min(usize::try_from(len).unwrap_or(chunk))];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(chunk as u64) as usize;
        if let Err(e) = recv.read_exact(&mut bytes[..n]).await {
            return Response::Error(format!("write buffer: the bytes stopped after {done} of {len}: {e}"));
        }
        if let Err(e) = session.lock().await.write(buffer, offset + done, &bytes[..n]) {
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
) -> std::result::Result<(), quinn::WriteError> {
    if let Err(e) = session.lock().await.check_transfer(buffer, offset, len) {
        return reply(send, &Response::Error(format!("read buffer: {e}"))).await;
    }
    reply(send, &Response::Done).await?;
    let chunk = limits.chunk_bytes.max(1);
    let mut bytes = vec![0u8; chunk.min(usize::try_from(len).unwrap_or(chunk))];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(chunk as u64) as usize;
        if session.lock().await.read(buffer, offset + done, &mut bytes[..n]).is_err() {
            // The buffer went away under the read (freed by another stream):
            // the client sees the stream reset instead of wrong bytes.
            let _ = send.reset(1u32.into());
            return Ok(());
        }
        send.write_all(&bytes[..n]).await?;
        done += n as u64;
    }
    Ok(())
}
