//! Replays the scheduler fuzz target's inputs: the regressions it found
//! (`fuzz/regressions/sched`, each once a broken invariant), its seeds
//! (`fuzz/seeds/sched`), and a fixed batch of pseudo-random inputs, through
//! the same checks (`gantry_backends::testing::sched_fuzz::run_case`).

use gantry::backends::testing::sched_fuzz::{Outcome, decode_case, run_case};

fn replay_dir(dir: &str) -> usize {
    let dir = gantry::testing::repo_root().join(dir);
    let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in &entries {
        let bytes = std::fs::read(path).unwrap();
        let case = decode_case(&bytes).unwrap();
        if let Err(v) = run_case(&case) {
            panic!("{}: {v}\n{case:#?}", path.display());
        }
    }
    entries.len()
}

#[test]
fn fuzz_regressions_pass() {
    replay_dir("fuzz/regressions/sched");
}

#[test]
fn fuzz_seeds_pass_and_are_scheduled() {
    let dir = gantry::testing::repo_root().join("fuzz/seeds/sched");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let case = decode_case(&std::fs::read(&path).unwrap()).unwrap();
        match run_case(&case) {
            Ok(Outcome::Checked { .. }) => n += 1,
            other => panic!("{}: seeds should schedule and check, got {other:?}", path.display()),
        }
    }
    assert!(n >= 3, "{n} seeds");
}

/// Bytes from a fixed generator, so the batch is the same on every run.
fn pseudo_random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (s >> 56) as u8
        })
        .collect()
}

#[test]
fn a_batch_of_random_cases_holds_every_invariant() {
    let (mut checked, mut refused, mut skipped, mut multi_split) = (0, 0, 0, 0);
    // SCHED_FUZZ_ONLY=<seed> replays one case (with GANTRY_SCHED_DEBUG=2 to see its splits).
    let only: Option<u64> = std::env::var("SCHED_FUZZ_ONLY").ok().and_then(|s| s.parse().ok());
    for seed in (0..400u64).filter(|s| only.is_none_or(|o| o == *s)) {
        let bytes = pseudo_random_bytes(seed, 64 + (seed as usize * 7) % 160);
        let case = decode_case(&bytes).unwrap();
        match run_case(&case) {
            Ok(Outcome::Checked { splits }) => {
                checked += 1;
                if std::env::var_os("SCHED_FUZZ_VERBOSE").is_some() {
                    eprintln!("seed {seed}: checked, {splits} splits");
                }
                multi_split += usize::from(splits > 1);
            }
            Ok(Outcome::ExpectedError(why)) => {
                refused += 1;
                if only.is_some() || std::env::var_os("SCHED_FUZZ_VERBOSE").is_some() {
                    eprintln!("seed {seed}: refused: {why}");
                }
            }
            Ok(Outcome::Skipped(why)) => {
                skipped += 1;
                eprintln!("seed {seed}: skipped: {why}");
            }
            Err(v) => panic!("seed {seed}: {v}\nbytes {bytes:?}\n{case:#?}"),
        }
    }
    eprintln!("{checked} checked ({multi_split} with several splits), {refused} refused, {skipped} skipped");
    // The generator must mostly make runnable, split graphs, or the invariants are checked on little.
    if only.is_some() {
        return;
    }
    assert!(checked >= 250 && multi_split >= 80 && skipped <= 20, "{checked} {multi_split} {refused} {skipped}");
}
