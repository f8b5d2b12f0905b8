//! The remote platform: the devices of every server a client is configured
//! for, named `remote0`, `remote1`, ... in the order of the servers and of
//! each server's devices.

use std::any::{Any, TypeId};
use std::sync::Arc;

use gantry_engine::{BackendErrorKind, Device, Error, Platform, Result};
use tokio::runtime::Runtime;

use super::config::RemoteConfig;
use super::device::RemoteDevice;
use super::link::{CallTimeouts, Link, WireBytes};
use crate::tls::client_config;

/// The bytes every link of a platform moved, as a platform extension
/// (`platform_extension::<WireStats>(platform)`), so a program can report
/// its network use without knowing the platform's type.
#[derive(Debug, Clone)]
pub struct WireStats {
    links: Vec<Arc<Link>>,
}

impl WireStats {
    /// Bytes sent and received so far, over every server.
    pub fn bytes(&self) -> WireBytes {
        self.links
            .iter()
            .map(|l| l.wire_bytes())
            .fold(WireBytes::default(), |a, b| WireBytes { sent: a.sent + b.sent, received: a.received + b.received })
    }
}

/// Devices on other machines (`"remote"`).
pub struct RemotePlatform {
    devices: Vec<RemoteDevice>,
    skipped: Vec<String>,
    stats: WireStats,
    _runtime: Arc<Runtime>,
}

impl std::fmt::Debug for RemotePlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.devices.iter().map(|d| d.name()).collect();
        f.debug_struct("RemotePlatform").field("devices", &names).field("skipped", &self.skipped).finish()
    }
}

impl RemotePlatform {
    /// Dials every server of `config` and lists their devices. A server that
    /// cannot be reached (or refuses this client) is left out and noted in
    /// [`RemotePlatform::skipped`]; only a failure to start the network
    /// runtime or to build the TLS configuration is an `Err`.
    pub fn connect(config: &RemoteConfig) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("gantry-remote")
            .enable_all()
            .build()
            .map_err(|e| {
                let reason = format!("cannot start the network runtime: {e}");
                Error::backend_with_source("remote", BackendErrorKind::Other, reason, e)
            })?;
        let runtime = Arc::new(runtime);
        let quic = client_config(&config.identity, config.times)?;
        let mut devices = Vec::new();
        let mut skipped = Vec::new();
        let mut links = Vec::new();
        for server in &config.servers {
            let timeouts = CallTimeouts { call: config.call_timeout, compute: config.compute_timeout };
            match Link::connect(server, runtime.clone(), quic.clone(), timeouts, config.limits) {
                Ok(link) => {
                    for index in 0..link.welcome().devices.len() {
                        let name = format!("remote{}", devices.len());
                        devices.push(RemoteDevice::new(link.clone(), index as u32, name, config.weight_cache));
                    }
                    links.push(link);
                }
                Err(e) => {
                    tracing::warn!(server = %server, error = %e, "remote server left out");
                    skipped.push(format!("{server}: {e}"));
                }
            }
        }
        Ok(Self { devices, skipped, stats: WireStats { links }, _runtime: runtime })
    }

    /// The devices, typed.
    pub fn remote_devices(&self) -> &[RemoteDevice] {
        &self.devices
    }

    /// Servers left out, with the reason.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// Bytes moved so far, over every server.
    pub fn wire_bytes(&self) -> WireBytes {
        self.stats.bytes()
    }
}

impl Platform for RemotePlatform {
    fn name(&self) -> &str {
        "remote"
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        self.devices.iter().map(|d| Arc::new(d.clone()) as Arc<dyn Device>).collect()
    }

    fn extension(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        (type_id == TypeId::of::<WireStats>()).then_some(&self.stats as &(dyn Any + Send + Sync))
    }
}
