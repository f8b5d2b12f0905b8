//! Making the certificates of a small deployment with rcgen (ECDSA P-256
//! keys, signed with ring): one authority, server certificates naming the
//! hosts clients dial, client certificates. `gantry rpc-certs` writes them
//! to a directory; the tests make them in memory.
//!
//! The authority's subject is always [`AUTHORITY_NAME`], so a later client
//! certificate can be signed from the authority's key alone
//! ([`client_from_authority_key`]).

use std::path::Path;

use gantry_engine::{Error, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The authority's common name.
pub const AUTHORITY_NAME: &str = "Gantry RPC authority";

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemPair {
    /// The certificate.
    pub cert: String,
    /// Its private key (PKCS#8).
    pub key: String,
}

/// An authority with one server and one client certificate it signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pki {
    /// The authority (keep its key private: it signs new clients).
    pub authority: PemPair,
    /// The server's certificate, naming the hosts it was made for.
    pub server: PemPair,
    /// A client's certificate.
    pub client: PemPair,
}

fn cert_error(what: &str, e: rcgen::Error) -> Error {
    Error::Unsupported(format!("certificates: {what}: {e}"))
}

/// Valid from the start of this year for ten years.
fn validity(params: &mut CertificateParams) {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let year = 1970 + (secs / 31_556_952) as i32;
    params.not_before = rcgen::date_time_ymd(year, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + 10, 1, 1);
}

fn authority_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, AUTHORITY_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    validity(&mut params);
    params
}

fn leaf(
    issuer: &Issuer<'_, &KeyPair>,
    common_name: &str,
    alt_names: &[String],
    usage: ExtendedKeyUsagePurpose,
) -> Result<PemPair> {
    let key = KeyPair::generate().map_err(|e| cert_error("key", e))?;
    let mut params = CertificateParams::new(alt_names.to_vec()).map_err(|e| cert_error("names", e))?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    validity(&mut params);
    let cert = params.signed_by(&key, issuer).map_err(|e| cert_error(common_name, e))?;
    Ok(PemPair { cert: cert.pem(), key: key.serialize_pem() })
}

/// A new authority, a server certificate for `hosts` (DNS names or IP
/// addresses clients dial) and a client certificate named `client`.
pub fn make_pki(hosts: &[String], client: &str) -> Result<Pki> {
    let ca_key = KeyPair::generate().map_err(|e| cert_error("authority key", e))?;
    let params = authority_params();
    let ca_cert = params.self_signed(&ca_key).map_err(|e| cert_error("authority", e))?;
    let authority = PemPair { cert: ca_cert.pem(), key: ca_key.serialize_pem() };
    let issuer = Issuer::new(params, &ca_key);
    let server = leaf(&issuer, "gantry rpc-server", hosts, ExtendedKeyUsagePurpose::ServerAuth)?;
    let client = leaf(&issuer, client, &[], ExtendedKeyUsagePurpose::ClientAuth)?;
    Ok(Pki { authority, server, client })
}

/// A client certificate named `client`, signed with the key of an authority
/// made by [`make_pki`].
pub fn client_from_authority_key(authority_key_pem: &str, client: &str) -> Result<PemPair> {
    let key = KeyPair::from_pem(authority_key_pem).map_err(|e| cert_error("authority key", e))?;
    let issuer = Issuer::new(authority_params(), &key);
    leaf(&issuer, client, &[], ExtendedKeyUsagePurpose::ClientAuth)
}

/// File names [`write_pki`] uses (and `GANTRY_REMOTE_TLS` expects).
pub mod files {
    /// The authority's certificate.
    pub const AUTHORITY: &str = "ca.pem";
    /// The authority's key.
    pub const AUTHORITY_KEY: &str = "ca.key";
    /// The server's certificate.
    pub const SERVER: &str = "server.pem";
    /// The server's key.
    pub const SERVER_KEY: &str = "server.key";
    /// The client's certificate.
    pub const CLIENT: &str = "client.pem";
    /// The client's key.
    pub const CLIENT_KEY: &str = "client.key";
}

fn write(path: &Path, text: &str, private: bool) -> Result<()> {
    let io = |e: std::io::Error| Error::Unsupported(format!("writing {}: {e}", path.display()));
    #[cfg(unix)]
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mode = if private { 0o600 } else { 0o644 };
        let mut f =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(path).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)
    }
    #[cfg(not(unix))]
    {
        let _ = private;
        std::fs::write(path, text).map_err(io)
    }
}

/// Writes `pki` into `dir` (created if needed) under the names of [`files`];
/// keys are readable by the owner only.
pub fn write_pki(pki: &Pki, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Unsupported(format!("creating {}: {e}", dir.display())))?;
    write(&dir.join(files::AUTHORITY), &pki.authority.cert, false)?;
    write(&dir.join(files::AUTHORITY_KEY), &pki.authority.key, true)?;
    write(&dir.join(files::SERVER), &pki.server.cert, false)?;
    write(&dir.join(files::SERVER_KEY), &pki.server.key, true)?;
    write(&dir.join(files::CLIENT), &pki.client.cert, false)?;
    write(&dir.join(files::CLIENT_KEY), &pki.client.key, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::TlsIdentity;

    #[test]
    fn made_certificates_load_as_identities() {
        let pki = make_pki(&["localhost".into(), "127.0.0.1".into()], "tester").unwrap();
        for leaf in [&pki.server, &pki.client] {
            let id = TlsIdentity::from_pem(
                pki.authority.cert.as_bytes(),
                leaf.cert.as_bytes(),
                leaf.key.as_bytes(),
                ("ca", "cert", "key"),
            )
            .unwrap();
            assert_eq!((id.authority.len(), id.chain.len()), (1, 1));
        }
        let again = client_from_authority_key(&pki.authority.key, "second").unwrap();
        assert!(again.cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(client_from_authority_key("not a key", "x").is_err());
        assert!(TlsIdentity::from_pem(b"", b"", b"", ("ca", "cert", "key")).is_err());
    }
}
