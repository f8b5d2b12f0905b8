//! Replays the server decoder's fuzz inputs: the regressions it found
//! (`fuzz/regressions/remote_server`, each once a failure), its seeds
//! (`fuzz/seeds/remote_server`), and a fixed batch of pseudo-random inputs of
//! both kinds (raw frames, structured graphs), through the same checks
//! (`gantry_backends::remote::testing::remote_fuzz::run`).

#![cfg(feature = "remote")]

use gantry::SplitMix64;
use gantry::backends::remote::testing::remote_fuzz::run;

fn replay_dir(dir: &str) -> usize {
    let dir = gantry::testing::repo_root().join(dir);
    let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in &entries {
        if let Err(e) = run(&std::fs::read(path).unwrap()) {
            panic!("{}: {e}", path.display());
        }
    }
    entries.len()
}

#[test]
fn fuzz_regressions_and_seeds_pass() {
    replay_dir("fuzz/regressions/remote_server");
    assert!(replay_dir("fuzz/seeds/remote_server") > 0, "the fuzz target has seeds");
}

#[test]
fn pseudo_random_inputs_pass() {
    let mut rng = SplitMix64::new(0x5e55_1017);
    for i in 0..400u64 {
        let len = (rng.next_u64() % 600) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if let Some(first) = data.first_mut() {
            *first = (i % 2) as u8;
        }
        if let Err(e) = run(&data) {
            panic!("input {i} ({data:?}): {e}");
        }
    }
}
