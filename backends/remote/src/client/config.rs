//! What a client needs to reach its servers: addresses, its TLS identity,
//! timeouts. From the environment or built in code.
//!
//! | variable | meaning |
//! |---|---|
//! | `GANTRY_REMOTE` | `host:port,host:port,...` of the servers (unset: no remote devices) |
//! | `GANTRY_REMOTE_TLS` | a directory from `gantry rpc-certs` (`ca.pem`, `client.pem`, `client.key`) |
//! | `GANTRY_REMOTE_CA`, `GANTRY_REMOTE_CERT`, `GANTRY_REMOTE_KEY` | the three files one by one (override the directory's) |
//! | `GANTRY_REMOTE_TIMEOUT_MS` | the call timeout: each step of a call (default 30000) |
//! | `GANTRY_REMOTE_COMPUTE_TIMEOUT_MS` | how long a compute may take (default 600000) |
//! | `GANTRY_REMOTE_IDLE_MS` | the connection's idle timeout (default 10000) |
//! | `GANTRY_REMOTE_WEIGHT_CACHE` | `0` never asks servers for weights they hold (`1`, the default, does; nothing else is accepted) |

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gantry_engine::{Error, Result};

use crate::certs::files;
use crate::tls::{TlsFiles, TlsIdentity, TransportTimes};
use crate::wire::Limits;

/// How a client reaches its servers.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// `host:port` of each server, in the order their devices are numbered.
    pub servers: Vec<String>,
    /// The client's certificate and the authority servers must be signed by.
    pub identity: Arc<TlsIdentity>,
    /// How long one step of a call may wait for the server.
    pub call_timeout: Duration,
    /// How long the server may compute one split (a dead server is noticed
    /// sooner, by the idle timeout).
    pub compute_timeout: Duration,
    /// Connection timing.
    pub times: TransportTimes,
    /// Ask servers for weights they hold before sending them.
    pub weight_cache: bool,
    /// Bounds on messages.
    pub limits: Limits,
}

/// Parses `host:port,host:port` (spaces and empty entries ignored).
pub fn parse_servers(list: &str) -> Vec<String> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// Whether `s` is `host:port`: a host (a bracketed IPv6 address, or a name
/// or IPv4 address without `:`) and a port from 1 to 65535.
fn is_host_port(s: &str) -> bool {
    let Some((host, port)) = s.rsplit_once(':') else { return false };
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => !host.is_empty() && !host.contains(':') && !host.chars().any(|c| c.is_whitespace() || c.is_control()),
    };
    host_ok && port.parse::<u16>().is_ok_and(|p| p > 0)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

fn env_ms(name: &str, default: u64) -> Result<Duration> {
    match env(name) {
        None => Ok(Duration::from_millis(default)),
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis)
            .ok_or_else(|| Error::Unsupported(format!("{name}={v:?}: expected milliseconds > 0"))),
    }
}

impl RemoteConfig {
    /// A configuration with the default timeouts.
    pub fn new(servers: Vec<String>, identity: Arc<TlsIdentity>) -> Self {
        Self {
            servers,
            identity,
            call_timeout: Duration::from_secs(30),
            compute_timeout: Duration::from_secs(600),
            times: TransportTimes::default(),
            weight_cache: true,
            limits: Limits::default(),
        }
    }

    /// The TLS files named by the environment (see the module's table).
    pub fn tls_files_from_env() -> Result<TlsFiles> {
        let dir = env("GANTRY_REMOTE_TLS").map(PathBuf::from);
        let pick = |var: &str, file: &str| -> Result<PathBuf> {
            env(var).map(PathBuf::from).or_else(|| dir.as_ref().map(|d| d.join(file))).ok_or_else(|| {
                Error::Unsupported(format!(
                    "remote devices need a client certificate: set GANTRY_REMOTE_TLS to a directory made by \
                     `gantry rpc-certs`, or {var}"
                ))
            })
        };
        Ok(TlsFiles {
            authority: pick("GANTRY_REMOTE_CA", files::AUTHORITY)?,
            cert: pick("GANTRY_REMOTE_CERT", files::CLIENT)?,
            key: pick("GANTRY_REMOTE_KEY", files::CLIENT_KEY)?,
        })
    }

    /// The configuration for `servers` with the rest from the environment.
    pub fn for_servers(servers: Vec<String>) -> Result<Self> {
        // A server no one could dial would only be skipped at connect, with
        // the run going on without it: refused here, by name.
        if let Some(bad) = servers.iter().find(|s| !is_host_port(s)) {
            return Err(Error::Unsupported(format!(
                "remote server {bad:?} is not HOST:PORT (a name or an address, then a port 1 to 65535; IPv6 as [::1]:5000)"
            )));
        }
        let identity = Arc::new(TlsIdentity::from_files(&Self::tls_files_from_env()?)?);
        let mut config = Self::new(servers, identity);
        config.call_timeout = env_ms("GANTRY_REMOTE_TIMEOUT_MS", 30_000)?;
        config.compute_timeout = env_ms("GANTRY_REMOTE_COMPUTE_TIMEOUT_MS", 600_000)?;
        config.times.idle_timeout = env_ms("GANTRY_REMOTE_IDLE_MS", 10_000)?;
        config.weight_cache = match env("GANTRY_REMOTE_WEIGHT_CACHE").as_deref() {
            None | Some("1") => true,
            Some("0") => false,
            Some(v) => return Err(Error::Unsupported(format!("GANTRY_REMOTE_WEIGHT_CACHE={v:?}: expected 0 or 1"))),
        };
        Ok(config)
    }

    /// The configuration `GANTRY_REMOTE` asks for, or `None` when it is unset.
    pub fn from_env() -> Result<Option<Self>> {
        match env("GANTRY_REMOTE").map(|v| parse_servers(&v)) {
            Some(servers) if !servers.is_empty() => Self::for_servers(servers).map(Some),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{is_host_port, parse_servers};

    #[test]
    fn addresses_are_host_and_port() {
        for good in ["127.0.0.1:5000", "gpu-box.lan:7000", "[::1]:5000", "localhost:65535"] {
            assert!(is_host_port(good), "{good}");
        }
        for bad in ["a:b:c", "localhost", "localhost:0", "localhost:70000", ":5000", "::1:5000", "[nope]:5000", "a b:1"]
        {
            assert!(!is_host_port(bad), "{bad}");
        }
    }

    #[test]
    fn server_lists() {
        assert_eq!(parse_servers(" 127.0.0.1:5000, ,[::1]:6000,"), vec!["127.0.0.1:5000", "[::1]:6000"]);
        assert!(parse_servers("").is_empty());
    }
}
