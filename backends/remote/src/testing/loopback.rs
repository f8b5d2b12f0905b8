//! Remote devices over loopback for tests: an authority with its server and
//! client certificates made at test time, servers in this process serving
//! CPU devices on `127.0.0.1`, and client configurations to reach them.

use std::sync::Arc;
use std::time::Duration;

use gantry_cpu::{CpuBackend, CpuDevice};
use gantry_engine::{Backend, Device, Result};

use crate::certs::{Pki, make_pki};
use crate::server::{ListenConfig, RunningServer, ServedDevice, ServerState, WeightCache};
use crate::tls::{TlsIdentity, TransportTimes};
use crate::wire::Limits;
use crate::{RemoteConfig, RemotePlatform};

/// Certificates for `localhost` and `127.0.0.1`, made now.
pub fn test_pki() -> Result<Pki> {
    make_pki(&["localhost".into(), "127.0.0.1".into()], "gantry test client")
}

/// The server's identity from `pki`.
pub fn server_identity(pki: &Pki) -> Result<TlsIdentity> {
    TlsIdentity::from_pem(
        pki.authority.cert.as_bytes(),
        pki.server.cert.as_bytes(),
        pki.server.key.as_bytes(),
        ("authority", "server certificate", "server key"),
    )
}

/// The client's identity from `pki`.
pub fn client_identity(pki: &Pki) -> Result<TlsIdentity> {
    TlsIdentity::from_pem(
        pki.authority.cert.as_bytes(),
        pki.client.cert.as_bytes(),
        pki.client.key.as_bytes(),
        ("authority", "client certificate", "client key"),
    )
}

/// How a loopback server is set up (see [`cpu_server_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerOptions {
    /// Threads of its CPU backend.
    pub threads: usize,
    /// Its limits (deadlines, memory cap, ...).
    pub limits: Limits,
    /// Most clients connected at once.
    pub max_clients: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self { threads: 1, limits: Limits::default(), max_clients: 8 }
    }
}

/// A server in this process serving one CPU device (`threads` threads) on
/// a free port of `127.0.0.1`, with `weights` as its cache.
pub fn cpu_server(pki: &Pki, threads: usize, weights: WeightCache) -> Result<RunningServer> {
    cpu_server_with(pki, weights, ServerOptions { threads, ..ServerOptions::default() })
}

/// A server in this process serving one CPU device on a free port of
/// `127.0.0.1`, with `weights` as its cache, set up by `options`.
pub fn cpu_server_with(pki: &Pki, weights: WeightCache, options: ServerOptions) -> Result<RunningServer> {
    let device: Arc<dyn Device> = Arc::new(CpuDevice::new());
    let backend: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(options.threads)?);
    let state = ServerState {
        devices: vec![ServedDevice { device, backend }],
        weights,
        limits: options.limits,
        name: "loopback test server".into(),
    };
    let config = ListenConfig {
        listen: ([127, 0, 0, 1], 0).into(),
        identity: server_identity(pki)?,
        times: TransportTimes::default(),
        max_clients: options.max_clients,
        worker_threads: 1,
    };
    RunningServer::start(config, state)
}

/// A client configuration for `servers` with `pki`'s client certificate and
/// short timeouts: `timeout` per call step and as the connection's idle
/// timeout (a compute may take ten times as long).
pub fn client_config(pki: &Pki, servers: &[String], timeout: Duration) -> Result<RemoteConfig> {
    let mut config = RemoteConfig::new(servers.to_vec(), Arc::new(client_identity(pki)?));
    config.call_timeout = timeout;
    config.compute_timeout = timeout * 10;
    config.times = TransportTimes { idle_timeout: timeout };
    Ok(config)
}

/// The remote platform of `servers`, which must all be reachable.
pub fn connect(pki: &Pki, servers: &[String], timeout: Duration) -> Result<RemotePlatform> {
    let platform = RemotePlatform::connect(&client_config(pki, servers, timeout)?)?;
    if let Some(skipped) = platform.skipped().first() {
        return Err(gantry_engine::Error::NotFound(format!("a loopback server: {skipped}")));
    }
    Ok(platform)
}
