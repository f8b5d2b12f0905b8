//! TLS for both ends: TLS 1.3 through rustls with ring as the only crypto
//! provider, mutual authentication against one certificate authority, and
//! the QUIC transport settings (idle timeout, keep-alives, windows).
//!
//! The server requires a client certificate signed by its `--client-ca`;
//! the client requires the server's certificate to be signed by its CA and
//! to name the host it dialled. A peer failing either is refused during the
//! handshake, before any request is read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gantry_engine::{BackendErrorKind, Error, Result};
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::wire::ALPN;

/// A peer's certificate chain and key, and the authority its peer must be signed by.
pub struct TlsIdentity {
    /// Certificates of the authority the other end must present a chain to.
    pub authority: Vec<CertificateDer<'static>>,
    /// This end's certificate chain (leaf first); empty for a client that
    /// presents none (which every server refuses: for tests).
    pub chain: Vec<CertificateDer<'static>>,
    /// This end's private key (`None` with an empty chain).
    pub key: Option<PrivateKeyDer<'static>>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("authority", &self.authority.len())
            .field("chain", &self.chain.len())
            .field("key", &self.key.is_some())
            .finish()
    }
}

/// Where a [`TlsIdentity`] is on disk: PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The authority the other end must be signed by.
    pub authority: PathBuf,
    /// This end's certificate (chain).
    pub cert: PathBuf,
    /// This end's private key.
    pub key: PathBuf,
}

/// A TLS set-up failure (a certificate or key that cannot be read or
/// used, a setting QUIC refuses): the transport cannot be built, so it is
/// of kind [`BackendErrorKind::Transport`].
fn tls_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::backend("remote", BackendErrorKind::Transport, format!("TLS: {what}: {e}"))
}

/// The most bytes a PEM file of certificates or a key may have (a chain of
/// a few certificates is a few KiB).
const MAX_PEM_BYTES: u64 = 1 << 20;

fn read_pem(path: &Path) -> Result<Vec<u8>> {
    gantry_engine::read_small_file(path, MAX_PEM_BYTES)
        .map_err(|e| tls_error(&format!("reading {}", path.display()), e))
}

/// Warns (as ssh would refuse) when the private key at `path` is readable
/// or writable by other users than its owner: `rpc-certs` writes keys 0600,
/// a copy may not keep that. A warning, not an error: the key works, and
/// some deployments hand keys over through group-readable mounts.
pub fn warn_if_readable_by_others(path: &Path) {
    if let Some(mode) = open_to_others(path) {
        tracing::warn!(
            key = %path.display(),
            mode = format!("{mode:o}"),
            "the private key is readable by other users (chmod 600 it)"
        );
    }
}

/// The permission bits of `path` when its group or other users may read,
/// write or run it; `None` when only its owner may (or it cannot be read:
/// opening it then fails with its own error).
fn open_to_others(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

impl TlsIdentity {
    /// Reads PEM files: certificates (several per file allowed) and a PKCS#8,
    /// PKCS#1 or SEC1 private key.
    pub fn from_files(files: &TlsFiles) -> Result<Self> {
        warn_if_readable_by_others(&files.key);
        let label = |p: &Path| p.display().to_string();
        Self::from_pem(
            &read_pem(&files.authority)?,
            &read_pem(&files.cert)?,
            &read_pem(&files.key)?,
            (&label(&files.authority), &label(&files.cert), &label(&files.key)),
        )
    }

    /// Reads the identity from PEM text (`labels` name the three parts in errors).
    pub fn from_pem(authority: &[u8], cert: &[u8], key: &[u8], labels: (&str, &str, &str)) -> Result<Self> {
        let certs = |pem: &[u8], label: &str| -> Result<Vec<CertificateDer<'static>>> {
            let certs = CertificateDer::pem_slice_iter(pem)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| tls_error(label, e))?;
            if certs.is_empty() {
                return Err(tls_error(label, "no certificate in it"));
            }
            Ok(certs)
        };
        Ok(Self {
            authority: certs(authority, labels.0)?,
            chain: certs(cert, labels.1)?,
            key: Some(PrivateKeyDer::from_pem_slice(key).map_err(|e| tls_error(labels.2, e))?),
        })
    }

    fn roots(&self) -> Result<Arc<RootCertStore>> {
        let mut roots = RootCertStore::empty();
        for c in &self.authority {
            roots.add(c.clone()).map_err(|e| tls_error("the authority certificate", e))?;
        }
        Ok(Arc::new(roots))
    }

    /// Checks this identity's certificate as a server built from it checks
    /// a client's: signed by the authority, valid now, for client use.
    pub fn verify_as_client(&self) -> Result<()> {
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(self.roots()?, provider())
            .build()
            .map_err(|e| tls_error("client verifier", e))?;
        let (leaf, intermediates) =
            self.chain.split_first().ok_or_else(|| tls_error("identity", "no certificate to verify"))?;
        verifier
            .verify_client_cert(leaf, intermediates, rustls::pki_types::UnixTime::now())
            .map_err(|e| tls_error("the client certificate", e))?;
        Ok(())
    }

    fn chain_and_key(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        match &self.key {
            Some(k) if !self.chain.is_empty() => Ok((self.chain.clone(), k.clone_key())),
            _ => Err(tls_error("identity", "a certificate and its key are needed")),
        }
    }
}

/// The one crypto provider: ring.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Timing of a QUIC connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportTimes {
    /// A connection with nothing heard from the peer for this long is lost
    /// (the smaller of the two ends' values applies).
    pub idle_timeout: Duration,
}

impl Default for TransportTimes {
    fn default() -> Self {
        Self { idle_timeout: Duration::from_secs(10) }
    }
}

fn transport(times: TransportTimes) -> Result<Arc<quinn::TransportConfig>> {
    let mut t = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(times.idle_timeout).map_err(|e| tls_error("idle timeout", e))?;
    t.max_idle_timeout(Some(idle));
    // Keep-alives let a peer that is busy computing stay alive, and one that
    // died be noticed, within the idle timeout.
    t.keep_alive_interval(Some((times.idle_timeout / 4).max(Duration::from_millis(100))));
    // Windows large enough for weights and activations to stream at memory speed on a LAN.
    t.stream_receive_window(quinn::VarInt::from_u32(16 << 20));
    t.receive_window(quinn::VarInt::from_u32(64 << 20));
    t.send_window(64 << 20);
    Ok(Arc::new(t))
}

/// The server's QUIC configuration: its certificate, and clients must present
/// one signed by `identity.authority`.
pub fn server_config(identity: &TlsIdentity, times: TransportTimes) -> Result<quinn::ServerConfig> {
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(identity.roots()?, provider())
        .build()
        .map_err(|e| tls_error("client verifier", e))?;
    let (chain, key) = identity.chain_and_key()?;
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| tls_error("protocol versions", e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| tls_error("server certificate", e))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(|e| tls_error("QUIC", e))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    config.transport_config(transport(times)?);
    Ok(config)
}

/// The client's QUIC configuration: servers must be signed by
/// `identity.authority`; this end presents `identity.chain` (none when empty).
pub fn client_config(identity: &TlsIdentity, times: TransportTimes) -> Result<quinn::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| tls_error("protocol versions", e))?
        .with_root_certificates(identity.roots()?);
    let mut tls = if identity.chain.is_empty() {
        builder.with_no_client_auth()
    } else {
        let (chain, key) = identity.chain_and_key()?;
        builder.with_client_auth_cert(chain, key).map_err(|e| tls_error("client certificate", e))?
    };
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| tls_error("QUIC", e))?;
    let mut config = quinn::ClientConfig::new(Arc::new(quic));
    config.transport_config(transport(times)?);
    Ok(config)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::open_to_others;

    #[test]
    fn a_key_open_to_others_is_told_from_an_owner_only_key() {
        let dir = tempfile::Builder::new().prefix("gantry-tls-mode-").tempdir().unwrap();
        let key = dir.path().join("server.key");
        std::fs::write(&key, b"not read here").unwrap();
        for (mode, expected) in
            [(0o600, None), (0o400, None), (0o644, Some(0o644)), (0o640, Some(0o640)), (0o602, Some(0o602))]
        {
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(open_to_others(&key), expected, "mode {mode:o}");
        }
        // A key that is not there is not warned about: opening it fails with its own error.
        assert_eq!(open_to_others(&dir.path().join("missing.key")), None);
    }
}
