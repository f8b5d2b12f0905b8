//! Two greedy clients cannot together hold more than the server's memory
//! cap (`--max-memory`); the refusal names the request and the cap, and a
//! client's memory is the others' again once it disconnects.

use std::time::{Duration, Instant};

use gantry_engine::Device;
use gantry_remote::server::WeightCache;
use gantry_remote::testing::loopback::{self, ServerOptions};
use gantry_remote::wire::Limits;

const MIB: usize = 1 << 20;

#[test]
fn two_greedy_clients_share_the_memory_cap() {
    let pki = loopback::test_pki().unwrap();
    let limits = Limits { max_memory: 48 << 20, ..Limits::default() };
    let server =
        loopback::cpu_server_with(&pki, WeightCache::new(), ServerOptions { limits, ..Default::default() }).unwrap();
    assert_eq!(server.usage().memory_cap, 48 << 20);
    let address = [server.local_addr().to_string()];
    let first = loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap();
    let second = loopback::connect(&pki, &address, Duration::from_secs(5)).unwrap();
    let (a, b) = (first.remote_devices()[0].buffer_type(), second.remote_devices()[0].buffer_type());

    let held = a.alloc_buffer(32 * MIB).unwrap();
    // Each alone could have 32 MiB; together they may not have 64.
    let Err(refused) = b.alloc_buffer(32 * MIB) else { panic!("two clients hold 64 MiB under a cap of 48") };
    let refused = refused.to_string();
    assert!(
        refused.contains(&format!("{} bytes", 32 * MIB)) && refused.contains(&format!("memory cap of {}", 48 * MIB)),
        "{refused}"
    );
    assert_eq!(server.usage().buffer_bytes, 32 << 20, "a refusal holds nothing");
    let rest = b.alloc_buffer(16 * MIB).unwrap();
    assert!(a.alloc_buffer(1).is_err(), "the cap is reached");
    assert_eq!(server.usage().buffer_bytes, 48 << 20);

    // The first client goes away without freeing: the server frees its buffers.
    drop(held);
    drop(first);
    let started = Instant::now();
    while server.usage().buffer_bytes != 16 << 20 {
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", server.usage());
        std::thread::sleep(Duration::from_millis(50));
    }
    let more = b.alloc_buffer(32 * MIB).unwrap();
    assert_eq!(server.usage().buffer_bytes, 48 << 20);
    drop((rest, more));
}
