//! A peer that announces many bytes and sends few holds only what it sent,
//! and only until the stream's deadline: the server answers with an error,
//! frees what the stream held and goes on serving the connection.

use std::time::{Duration, Instant};

use gantry_remote::server::{RunningServer, WeightCache};
use gantry_remote::testing::loopback::{self, ServerOptions};
use gantry_remote::tls::{TransportTimes, client_config};
use gantry_remote::wire::{Limits, PROTOCOL_VERSION, Request, Response};
use quinn::{Connection, RecvStream, SendStream};

/// A raw connection to `server` with the test client's certificate.
async fn dial(server: &RunningServer, pki: &gantry_remote::certs::Pki) -> (quinn::Endpoint, Connection) {
    let identity = loopback::client_identity(pki).unwrap();
    let config = client_config(&identity, TransportTimes { idle_timeout: Duration::from_secs(10) }).unwrap();
    let endpoint = quinn::Endpoint::client(([127, 0, 0, 1], 0).into()).unwrap();
    let conn = endpoint.connect_with(config, server.local_addr(), "localhost").unwrap().await.unwrap();
    (endpoint, conn)
}

async fn answer(recv: &mut RecvStream) -> Response {
    let mut len = [0u8; 4];
    recv.read_exact(&mut len).await.unwrap();
    let mut message = vec![0u8; u32::from_le_bytes(len) as usize];
    recv.read_exact(&mut message).await.unwrap();
    Response::decode(&message).unwrap()
}

async fn send_request(send: &mut SendStream, request: &Request<'_>) {
    let message = request.encode();
    send.write_all(&(message.len() as u32).to_le_bytes()).await.unwrap();
    send.write_all(&message).await.unwrap();
}

/// What the server's streams hold once they hold anything (waiting at most
/// `within` for the bytes sent to be taken in).
async fn held_by_streams(server: &RunningServer, within: Duration) -> usize {
    let started = Instant::now();
    loop {
        let held = server.usage().stream_bytes;
        if held > 0 || started.elapsed() > within {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One whole request on a new stream, and its answer.
async fn call(conn: &Connection, request: &Request<'_>) -> Response {
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send_request(&mut send, request).await;
    send.finish().unwrap();
    answer(&mut recv).await
}

#[test]
fn a_peer_that_stalls_mid_stream_is_cut_off_and_holds_only_what_it_sent() {
    let pki = loopback::test_pki().unwrap();
    let deadline = Duration::from_millis(1000);
    let limits = Limits { stream_timeout: deadline, ..Limits::default() };
    let server =
        loopback::cpu_server_with(&pki, WeightCache::new(), ServerOptions { limits, ..Default::default() }).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        let (_endpoint, conn) = dial(&server, &pki).await;

        // A request announced as 16 MiB (the largest message), of which one byte comes.
        let announced = limits.max_message_bytes as u32;
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&announced.to_le_bytes()).await.unwrap();
        send.write_all(&[1]).await.unwrap();
        let held = held_by_streams(&server, deadline / 2).await;
        assert!(held > 0 && held <= 64, "the server holds {held} bytes for 5 that arrived");
        let started = Instant::now();
        let Response::Error(message) = answer(&mut recv).await else { panic!("no error") };
        assert!(message.contains("stalled") && message.contains(&format!("1 of {announced} bytes")), "{message}");
        assert!(started.elapsed() < deadline * 3, "cut off after {:?}", started.elapsed());
        assert_eq!(server.usage().stream_bytes, 0, "what the stream held is freed");

        // The connection goes on: hello, a buffer, and a write that stalls after 1000 of 8 MiB.
        let hello = call(&conn, &Request::Hello { version: PROTOCOL_VERSION, client: "test" }).await;
        assert!(matches!(hello, Response::Welcome { .. }), "{hello:?}");
        let Response::Buffer { buffer } = call(&conn, &Request::AllocBuffer { device: 0, size: 8 << 20 }).await else {
            panic!("no buffer");
        };
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send_request(&mut send, &Request::WriteBuffer { buffer, offset: 0, len: 8 << 20 }).await;
        send.write_all(&[7u8; 1000]).await.unwrap();
        let held = held_by_streams(&server, deadline / 2).await;
        assert!(held > 0 && held <= 4096, "the server holds {held} bytes for 1000 that arrived");
        let Response::Error(message) = answer(&mut recv).await else { panic!("no error") };
        assert!(message.contains("stopped after 0 of 8388608") && message.contains("1000 of 1048576"), "{message}");
        assert_eq!(server.usage().stream_bytes, 0);

        // A write whose bytes all come is still taken, and read back.
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send_request(&mut send, &Request::WriteBuffer { buffer, offset: 0, len: 4 }).await;
        send.write_all(&[1, 2, 3, 4]).await.unwrap();
        send.finish().unwrap();
        assert_eq!(answer(&mut recv).await, Response::Done);
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send_request(&mut send, &Request::ReadBuffer { buffer, offset: 0, len: 4 }).await;
        send.finish().unwrap();
        assert_eq!(answer(&mut recv).await, Response::Done);
        let mut bytes = [0u8; 4];
        recv.read_exact(&mut bytes).await.unwrap();
        assert_eq!(bytes, [1, 2, 3, 4]);
    });
}

/// What the streams of every client hold while requests arrive is capped
/// (`--max-stream-memory`): a second large write arriving beside a first is
/// refused with an error naming the cap, small requests still get through
/// (each stream's first 4 KiB is not counted), and the first write, whose
/// bytes were counted, completes.
#[test]
fn streams_together_hold_no_more_than_the_stream_memory_cap() {
    const KIB: usize = 1024;
    let pki = loopback::test_pki().unwrap();
    let limits = Limits { max_stream_memory: 1 << 20, ..Limits::default() };
    let server =
        loopback::cpu_server_with(&pki, WeightCache::new(), ServerOptions { limits, ..Default::default() }).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        let (_endpoint, conn) = dial(&server, &pki).await;
        let hello = call(&conn, &Request::Hello { version: PROTOCOL_VERSION, client: "test" }).await;
        assert!(matches!(hello, Response::Welcome { .. }), "{hello:?}");
        let Response::Buffer { buffer } = call(&conn, &Request::AllocBuffer { device: 0, size: 4 << 20 }).await else {
            panic!("no buffer");
        };
        // A write of one 1 MiB chunk, of which 900 KiB come now: the stream
        // grows to hold them (1 MiB, nearly all of it counted).
        let (mut first_send, mut first_recv) = conn.open_bi().await.unwrap();
        send_request(&mut first_send, &Request::WriteBuffer { buffer, offset: 0, len: 1 << 20 }).await;
        first_send.write_all(&vec![1u8; 900 * KIB]).await.unwrap();
        let started = Instant::now();
        while server.usage().stream_bytes < 900 * KIB {
            assert!(started.elapsed() < Duration::from_secs(10), "{:?}", server.usage());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // A second write beside it is refused once its stream would hold more than the first 4 KiB.
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send_request(&mut send, &Request::WriteBuffer { buffer, offset: 1 << 20, len: 1 << 20 }).await;
        send.write_all(&vec![2u8; 100 * KIB]).await.unwrap();
        let Response::Error(message) = answer(&mut recv).await else { panic!("the second write was taken") };
        assert!(message.contains("--max-stream-memory") && message.contains("cap of 1048576"), "{message}");
        // Small requests still get through.
        let hello = call(&conn, &Request::Hello { version: PROTOCOL_VERSION, client: "test" }).await;
        assert!(matches!(hello, Response::Welcome { .. }), "{hello:?}");
        // The first write completes.
        first_send.write_all(&vec![1u8; 124 * KIB]).await.unwrap();
        first_send.finish().unwrap();
        assert_eq!(answer(&mut first_recv).await, Response::Done);
        let started = Instant::now();
        while server.usage().stream_bytes != 0 {
            assert!(started.elapsed() < Duration::from_secs(10), "{:?}", server.usage());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}
