//! Making the certificates of a small deployment with rcgen (ECDSA P-256
//! keys, signed with ring): one authority, server certificates naming the
//! hosts clients dial, client certificates. `gantry rpc-certs` writes them
//! to a directory; the tests make them in memory.
//!
//! The authority's subject is always [`AUTHORITY_NAME`], so a later client
//! certificate can be signed from the authority's key, and is checked
//! against the authority's certificate before it is written
//! ([`client_from_authority`]).

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

/// The longest common name X.509 allows (`ub-common-name`).
const MAX_COMMON_NAME: usize = 64;

fn leaf(
    issuer: &Issuer<'_, &KeyPair>,
    common_name: &str,
    alt_names: &[String],
    usage: ExtendedKeyUsagePurpose,
) -> Result<PemPair> {
    // An empty name, or one with control characters (a newline), names no
    // one a log or an operator can tell apart.
    if common_name.trim().is_empty() || common_name.chars().any(char::is_control) {
        return Err(Error::Unsupported(format!(
            "the name {common_name:?} is empty or holds control characters: a certificate's name must be readable"
        )));
    }
    // A longer name makes a certificate no verifier reads.
    if common_name.chars().count() > MAX_COMMON_NAME {
        return Err(Error::Unsupported(format!(
            "the name {:?}… is longer than the {MAX_COMMON_NAME} characters a certificate's common name may have",
            common_name.chars().take(16).collect::<String>()
        )));
    }
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
    // A name a client could not dial would make a certificate no client accepts.
    for host in hosts {
        if rustls::pki_types::ServerName::try_from(host.as_str()).is_err() {
            return Err(Error::Unsupported(format!(
                "host {host:?} is neither a DNS name nor an IP address: the server certificate must name what \
                 clients dial"
            )));
        }
    }
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
/// made by [`make_pki`] (`authority` its certificate and `authority_key` its
/// key, PEM). The new certificate is verified against `authority` as a
/// server verifies its clients before it is returned: a key that is not
/// the certificate's (the files of two authorities mixed) is an error
/// instead of a certificate every server refuses.
pub fn client_from_authority(authority: &str, authority_key: &str, client: &str) -> Result<PemPair> {
    let key = KeyPair::from_pem(authority_key).map_err(|e| cert_error("authority key", e))?;
    let issuer = Issuer::new(authority_params(), &key);
    let pair = leaf(&issuer, client, &[], ExtendedKeyUsagePurpose::ClientAuth)?;
    let labels = ("the authority certificate", "the new client certificate", "its key");
    let identity =
        crate::tls::TlsIdentity::from_pem(authority.as_bytes(), pair.cert.as_bytes(), pair.key.as_bytes(), labels)?;
    identity.verify_as_client().map_err(|e| {
        Error::Unsupported(format!(
            "the authority key does not belong to the authority certificate (a server would refuse what it signs): {}",
            e.reason()
        ))
    })?;
    Ok(pair)
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

/// Writes `text` to a new file at `path`; a `private` file (a key) is
/// readable by the owner only (0600) from its creation, before a byte of
/// the key is in it. Nothing that exists is replaced or followed: the
/// create is exclusive (`O_EXCL`), so a file, or a link even to nowhere,
/// already at `path` is an error.
fn write(path: &Path, text: &str, private: bool) -> Result<()> {
    use std::io::Write;
    let io = |e: std::io::Error| Error::Unsupported(format!("writing {}: {e}", path.display()));
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.mode(if private { 0o600 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = private;
    open.open(path).map_err(io)?.write_all(text.as_bytes()).map_err(io)
}

/// The first of `names` that exists in `dir` (a file, a folder or a link,
/// even one to nowhere).
fn first_existing(dir: &Path, names: &[&str]) -> Option<std::path::PathBuf> {
    names.iter().map(|n| dir.join(n)).find(|p| p.symlink_metadata().is_ok())
}

/// Writes `pki` into `dir` (created if needed) under the names of [`files`];
/// keys are readable by the owner only. If any of the six files exists
/// already (an authority whose key was moved away still signed the
/// certificates beside it), nothing is written: a new authority would make
/// every certificate the old one signed useless.
pub fn write_pki(pki: &Pki, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Unsupported(format!("creating {}: {e}", dir.display())))?;
    let all =
        [files::AUTHORITY, files::AUTHORITY_KEY, files::SERVER, files::SERVER_KEY, files::CLIENT, files::CLIENT_KEY];
    if let Some(path) = first_existing(dir, &all) {
        return Err(Error::Unsupported(format!(
            "{} exists: a new authority would replace it and invalidate every certificate the old one signed \
             (use --add-client NAME to sign one more, or write to another folder)",
            path.display()
        )));
    }
    write(&dir.join(files::AUTHORITY), &pki.authority.cert, false)?;
    write(&dir.join(files::AUTHORITY_KEY), &pki.authority.key, true)?;
    write(&dir.join(files::SERVER), &pki.server.cert, false)?;
    write(&dir.join(files::SERVER_KEY), &pki.server.key, true)?;
    write(&dir.join(files::CLIENT), &pki.client.cert, false)?;
    write(&dir.join(files::CLIENT_KEY), &pki.client.key, true)
}

/// The file stem [`write_client`] uses for a client called `name`: ASCII
/// letters, digits and `-` kept, anything else `_`.
pub fn client_file_stem(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

/// Writes one more client's certificate and key into `dir` as
/// `STEM.pem` and `STEM.key` ([`client_file_stem`] of `name`; the key
/// 0600) and returns the two paths. A name whose files would be the
/// authority's, the server's or the first client's (`ca`, `server`,
/// `client`), or whose files exist already, is refused before anything is
/// written.
pub fn write_client(pair: &PemPair, dir: &Path, name: &str) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let stem = client_file_stem(name);
    let (cert, key) = (format!("{stem}.pem"), format!("{stem}.key"));
    let reserved =
        [files::AUTHORITY, files::AUTHORITY_KEY, files::SERVER, files::SERVER_KEY, files::CLIENT, files::CLIENT_KEY];
    if stem.is_empty() || reserved.iter().any(|&r| r == cert || r == key) {
        return Err(Error::Unsupported(format!(
            "client name {name:?} would write {cert} and {key}, which are the authority's, the server's or the first \
             client's files: choose another name"
        )));
    }
    // Another client's files (the same name, or one whose file stem is the
    // same: `ü` and `é` are both `_`) hold its only key: never replaced.
    if let Some(path) = first_existing(dir, &[&cert, &key]) {
        return Err(Error::Unsupported(format!(
            "{} exists (a client named {name:?}, or one whose file name is the same, was signed before): \
             choose another name, or remove its files first",
            path.display()
        )));
    }
    let (cert_path, key_path) = (dir.join(cert), dir.join(key));
    write(&cert_path, &pair.cert, false)?;
    write(&key_path, &pair.key, true)?;
    Ok((cert_path, key_path))
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
        // Hosts a client could not dial are refused, naming them.
        for bad in ["a b", "", "host/path", "-", "ünïcode"] {
            let e = make_pki(&[bad.into()], "c").unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
        let again = client_from_authority(&pki.authority.cert, &pki.authority.key, "second").unwrap();
        assert!(again.cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(client_from_authority(&pki.authority.cert, "not a key", "x").is_err());
        // Another authority's key, or a server key, beside this certificate.
        let other = make_pki(&["localhost".into()], "other").unwrap();
        for key in [&other.authority.key, &pki.server.key] {
            let e = client_from_authority(&pki.authority.cert, key, "x").unwrap_err().to_string();
            assert!(e.contains("does not belong to the authority certificate"), "{e}");
        }
        assert!(TlsIdentity::from_pem(b"", b"", b"", ("ca", "cert", "key")).is_err());
    }

    /// A scratch folder of this test's own under the system's temp folder.
    /// Removed when the guard drops, pass or fail.
    fn scratch(tag: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("gantry-certs-{tag}-")).tempdir().unwrap()
    }

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[cfg(unix)]
    #[test]
    fn keys_are_owner_only_and_nothing_that_exists_is_replaced_or_followed() {
        let folder = scratch("modes");
        let dir = folder.path().to_owned();
        let pki = make_pki(&["localhost".into()], "tester").unwrap();
        // Any one of the six files there (the authority's key moved away,
        // a key left by another tool, a link to elsewhere or to nowhere):
        // refused, nothing written, the link's target untouched.
        let elsewhere = folder.path().join("elsewhere");
        std::fs::write(&elsewhere, "someone's file").unwrap();
        for (name, existing) in [
            (files::SERVER, Some("old")),
            (files::CLIENT_KEY, Some("old")),
            (files::AUTHORITY_KEY, None),
            (files::CLIENT_KEY, None),
        ] {
            let sub = dir.join(format!("refused-{name}-{}", existing.is_some()));
            std::fs::create_dir(&sub).unwrap();
            match existing {
                Some(text) => std::fs::write(sub.join(name), text).unwrap(),
                None if name == files::AUTHORITY_KEY => {
                    std::os::unix::fs::symlink(sub.join("nowhere"), sub.join(name)).unwrap()
                }
                None => std::os::unix::fs::symlink(&elsewhere, sub.join(name)).unwrap(),
            }
            let e = write_pki(&pki, &sub).unwrap_err().to_string();
            assert!(e.contains(&format!("{name} exists")) && e.contains("invalidate"), "{e}");
            assert_eq!(std::fs::read_dir(&sub).unwrap().count(), 1, "{name}: nothing else written");
            assert!(!sub.join("nowhere").exists());
        }
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "someone's file");
        write_pki(&pki, &dir).unwrap();
        for key in [files::AUTHORITY_KEY, files::SERVER_KEY, files::CLIENT_KEY] {
            assert_eq!(mode(&dir.join(key)), 0o600, "{key}");
        }
        assert_eq!(mode(&dir.join(files::AUTHORITY)), 0o644);
        let pair = client_from_authority(&pki.authority.cert, &pki.authority.key, "second client").unwrap();
        let (cert, key) = write_client(&pair, &dir, "second client").unwrap();
        assert!(cert.ends_with("second_client.pem") && key.ends_with("second_client.key"));
        assert_eq!((mode(&cert), mode(&key)), (0o644, 0o600));
        assert_eq!(std::fs::read_to_string(&key).unwrap(), pair.key);
        // A client's files are never replaced: not by the same name again,
        // nor by a name of the same file stem (`ü` and `é` are both `_`).
        let again = client_from_authority(&pki.authority.cert, &pki.authority.key, "second client").unwrap();
        let e = write_client(&again, &dir, "second client").unwrap_err().to_string();
        assert!(e.contains("second_client.pem exists"), "{e}");
        assert_eq!(std::fs::read_to_string(&key).unwrap(), pair.key);
        write_client(&pair, &dir, "ü").unwrap();
        let e = write_client(&again, &dir, "é").unwrap_err().to_string();
        assert!(e.contains("_.pem exists"), "{e}");
        assert_eq!(std::fs::read_to_string(dir.join("_.key")).unwrap(), pair.key);
    }

    #[test]
    fn a_client_name_that_would_overwrite_the_authority_or_server_is_refused() {
        let folder = scratch("names");
        let dir = folder.path().to_owned();
        let pki = make_pki(&["localhost".into()], "tester").unwrap();
        write_pki(&pki, &dir).unwrap();
        let pair = client_from_authority(&pki.authority.cert, &pki.authority.key, "x").unwrap();
        for name in ["ca", "server", "client", "", "???"] {
            let before: Vec<String> = [files::AUTHORITY_KEY, files::SERVER_KEY]
                .iter()
                .map(|f| std::fs::read_to_string(dir.join(f)).unwrap())
                .collect();
            let refused = name != "???";
            let result = write_client(&pair, &dir, name);
            assert_eq!(result.is_err(), refused, "{name:?}: {result:?}");
            let after: Vec<String> = [files::AUTHORITY_KEY, files::SERVER_KEY]
                .iter()
                .map(|f| std::fs::read_to_string(dir.join(f)).unwrap())
                .collect();
            assert_eq!(before, after, "{name:?} left the authority's and server's keys as they were");
        }
        for unreadable in ["", "  ", "a\nb", "tab\there"] {
            let e = client_from_authority(&pki.authority.cert, &pki.authority.key, unreadable).unwrap_err();
            assert!(e.to_string().contains("empty or holds control characters"), "{unreadable:?}: {e}");
        }
        assert!(make_pki(&["localhost".into()], "").is_err());
    }
}
