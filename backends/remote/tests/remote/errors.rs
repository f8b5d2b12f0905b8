//! A remote device's failures are typed: a host tells a server it cannot
//! reach (`Transport`) from everything else without reading the message.

use std::sync::Arc;
use std::time::Duration;

use gantry_engine::BackendErrorKind;
use gantry_remote::client::{CallTimeouts, Link};
use gantry_remote::testing::loopback;
use gantry_remote::tls::{TlsIdentity, TransportTimes, client_config};
use gantry_remote::wire::Limits;

fn runtime() -> Arc<tokio::runtime::Runtime> {
    Arc::new(tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap())
}

fn dial(address: &str, identity: &TlsIdentity) -> gantry_engine::Error {
    let short = Duration::from_millis(400);
    let quic = client_config(identity, TransportTimes { idle_timeout: short }).unwrap();
    let timeouts = CallTimeouts { call: short, compute: short };
    match Link::connect(address, runtime(), quic, timeouts, Limits::default()) {
        Ok(_) => panic!("{address} answered"),
        Err(e) => e,
    }
}

#[test]
fn a_server_that_cannot_be_reached_is_a_transport_error() {
    let pki = loopback::test_pki().unwrap();
    let identity = loopback::client_identity(&pki).unwrap();

    // No port: the address does not resolve; the resolver's error is the source.
    let unresolved = dial("127.0.0.1", &identity);
    assert_eq!(unresolved.backend_kind(), Some(BackendErrorKind::Transport), "{unresolved}");
    let source = std::error::Error::source(&unresolved).and_then(|s| s.downcast_ref::<std::io::Error>());
    assert!(source.is_some(), "the io::Error is kept: {unresolved:?}");

    // A port nothing listens on: the handshake gets no answer.
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let silent = dial(&format!("127.0.0.1:{port}"), &identity);
    assert_eq!(silent.backend_kind(), Some(BackendErrorKind::Transport), "{silent}");
}

#[test]
fn a_certificate_that_cannot_be_read_is_a_transport_error() {
    let missing = std::env::temp_dir().join("gantry-no-such-dir").join("ca.pem");
    let files = gantry_remote::tls::TlsFiles { authority: missing.clone(), cert: missing.clone(), key: missing };
    let e = TlsIdentity::from_files(&files).unwrap_err();
    assert_eq!(e.backend_kind(), Some(BackendErrorKind::Transport), "{e}");
    assert!(e.to_string().contains("TLS: reading"), "{e}");
}
