//! Peers that start a TLS handshake and stall do not lock real clients out:
//! a `--max-clients` slot is taken only once a handshake is done, and a
//! handshake that stalls is dropped at its deadline.

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gantry_remote::server::{RunningServer, ServerUsage, WeightCache};
use gantry_remote::testing::loopback::{self, ServerOptions};
use gantry_remote::wire::{ALPN, Limits};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Raised when the stalling peers may go on (and fail).
#[derive(Debug, Default)]
struct Release {
    go: Mutex<bool>,
    raised: Condvar,
}

impl Release {
    fn wait(&self) {
        let go = self.go.lock().unwrap();
        // Bounded, so a failed test does not leave a thread behind forever.
        let _ = self.raised.wait_timeout_while(go, Duration::from_secs(60), |go| !*go).unwrap();
    }

    fn raise(&self) {
        *self.go.lock().unwrap() = true;
        self.raised.notify_all();
    }
}

/// A client's check of the server's certificate that blocks until released
/// and then refuses it: the peer never sends the end of its handshake, and
/// its (single) thread is stuck meanwhile, as a stalled peer would be.
#[derive(Debug)]
struct Stall(Arc<Release>);

impl ServerCertVerifier for Stall {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.0.wait();
        Err(rustls::Error::General("a peer that stalled on purpose".into()))
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not spoken".into()))
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider().signature_verification_algorithms.supported_schemes()
    }
}

/// A peer on its own thread that dials `server` and stalls in the middle of
/// the handshake until `release` is raised; it returns whether its
/// handshake ended in an error (it always should).
fn stalling_peer(server: SocketAddr, release: Arc<Release>) -> JoinHandle<bool> {
    std::thread::spawn(move || {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Stall(release)))
            .with_no_client_auth();
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let config = quinn::ClientConfig::new(Arc::new(quic));
        // One thread: the blocked check stops everything the peer does.
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let endpoint = quinn::Endpoint::client(([127, 0, 0, 1], 0).into()).unwrap();
            let connecting = endpoint.connect_with(config, server, "localhost").unwrap();
            connecting.await.is_err()
        })
    })
}

/// Waits up to 10 s for the server's usage to satisfy `ready`.
fn wait_for(server: &RunningServer, what: &str, ready: impl Fn(&ServerUsage) -> bool) {
    wait_within(server, Duration::from_secs(10), what, ready);
}

/// Waits up to `bound` for the server's usage to satisfy `ready`.
fn wait_within(server: &RunningServer, bound: Duration, what: &str, ready: impl Fn(&ServerUsage) -> bool) {
    let started = Instant::now();
    while !ready(&server.usage()) {
        assert!(started.elapsed() < bound, "{what}: {:?} after {:?}", server.usage(), started.elapsed());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client that is done (its platform dropped, as when `gantry run`
/// exits) gives its `--max-clients` slot back at once: its close reaches
/// the server before the drop returns, not at the server's idle timeout
/// (10 s), so one-at-a-time clients are never refused.
#[test]
fn a_client_that_is_done_gives_its_slot_back_at_once() {
    let pki = loopback::test_pki().unwrap();
    let options = ServerOptions { max_clients: 1, ..Default::default() };
    let server = loopback::cpu_server_with(&pki, WeightCache::new(), options).unwrap();
    let address = [server.local_addr().to_string()];
    for round in 0..4 {
        let platform =
            loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(platform.remote_devices().len(), 1);
        drop(platform);
        wait_within(&server, Duration::from_secs(2), "the slot given back", |u| u.clients == 0);
    }
}

#[test]
fn stalled_handshakes_do_not_take_the_client_slot() {
    let pki = loopback::test_pki().unwrap();
    // Handshakes may stall for longer than this test runs.
    let limits = Limits { handshake_timeout: Duration::from_secs(60), ..Limits::default() };
    let options = ServerOptions { limits, max_clients: 1, ..Default::default() };
    let server = loopback::cpu_server_with(&pki, WeightCache::new(), options).unwrap();
    let release = Arc::new(Release::default());
    let peers: Vec<_> = (0..4).map(|_| stalling_peer(server.local_addr(), release.clone())).collect();
    wait_for(&server, "four handshakes under way", |u| u.handshakes == 4);

    let address = [server.local_addr().to_string()];
    let platform = loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap();
    assert_eq!(platform.remote_devices().len(), 1);
    wait_for(&server, "the real client counted", |u| u.clients == 1 && u.handshakes == 4);

    // The one slot is taken now: a second real client is refused, by name.
    let refused = loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap_err().to_string();
    assert!(refused.contains("too many clients"), "{refused}");

    release.raise();
    for peer in peers {
        assert!(peer.join().unwrap(), "a stalled peer's handshake failed");
    }
    wait_for(&server, "the stalled handshakes gone", |u| u.handshakes == 0 && u.clients == 1);
    drop(platform);
    wait_for(&server, "the slot given back", |u| u.clients == 0);
    loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap();
}

#[test]
fn a_stalled_handshake_is_dropped_at_its_deadline() {
    let pki = loopback::test_pki().unwrap();
    let limits = Limits { handshake_timeout: Duration::from_millis(1500), max_handshakes: 2, ..Limits::default() };
    let options = ServerOptions { limits, max_clients: 1, ..Default::default() };
    let server = loopback::cpu_server_with(&pki, WeightCache::new(), options).unwrap();
    let release = Arc::new(Release::default());
    let peers: Vec<_> = (0..2).map(|_| stalling_peer(server.local_addr(), release.clone())).collect();
    wait_for(&server, "two handshakes under way", |u| u.handshakes == 2);

    // The handshakes run out of time and free their places: a real client
    // gets in although the peers never go on.
    wait_for(&server, "the stalled handshakes dropped", |u| u.handshakes == 0);
    let address = [server.local_addr().to_string()];
    let platform = loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap();
    assert_eq!(platform.remote_devices().len(), 1);
    assert_eq!(server.usage().clients, 1);

    release.raise();
    for peer in peers {
        assert!(peer.join().unwrap(), "a stalled peer's handshake failed");
    }
}

/// An authenticated peer that connects and then only keeps the connection
/// alive held a `--max-clients` slot for ever. A connection holding no
/// buffer and running no request is closed at `--unused-timeout`; one that
/// holds a buffer keeps its slot; and the idle client dials again by
/// itself on its next call.
#[test]
fn a_connection_holding_nothing_gives_its_slot_back_at_the_unused_timeout() {
    use gantry_engine::Device;
    let pki = loopback::test_pki().unwrap();
    let limits = Limits { unused_timeout: Duration::from_millis(800), ..Limits::default() };
    let options = ServerOptions { limits, max_clients: 1, ..Default::default() };
    let server = loopback::cpu_server_with(&pki, WeightCache::new(), options).unwrap();
    let address = [server.local_addr().to_string()];

    // A client holding a buffer keeps its slot past the timeout.
    let holder = loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap();
    let buffer = holder.remote_devices()[0].buffer_type().alloc_buffer(4096).unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(server.usage().clients, 1, "a connection holding a buffer was closed");
    let refused = loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap_err().to_string();
    assert!(refused.contains("too many clients"), "{refused}");

    // Once it frees everything, it is unused: its slot comes back.
    drop(buffer);
    wait_within(&server, Duration::from_secs(5), "the unused connection closed", |u| u.clients == 0);
    let idle = loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap();
    assert_eq!(server.usage().clients, 1);
    wait_within(&server, Duration::from_secs(5), "the idle connection closed", |u| u.clients == 0);
    // A buffer of 0 bytes holds nothing either.
    let empty = loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap();
    let nothing = empty.remote_devices()[0].buffer_type().alloc_buffer(0).unwrap();
    wait_within(&server, Duration::from_secs(5), "the connection of an empty buffer closed", |u| u.clients == 0);
    drop((nothing, empty));

    // The first client's next call dials again instead of failing.
    drop(idle);
    let again = holder.remote_devices()[0].buffer_type().alloc_buffer(4096).unwrap();
    assert_eq!(server.usage().clients, 1);
    drop(again);
}
