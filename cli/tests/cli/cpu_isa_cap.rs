//! `GANTRY_CPU_ISA` as a user sets it: `gantry devices` names the capped
//! kernel path, and a value that names no path is an error from the
//! commands that make a CPU backend, naming the variable (no panic).

use std::process::{Command, Output};

use gantry::backends::cpu::Isa;

fn gantry(cap: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .env("GANTRY_CPU_ISA", cap)
        .env("GANTRY_REMOTE", "")
        .output()
        .unwrap()
}

#[test]
fn devices_names_the_capped_path() {
    // The fastest path this CPU runs at or below each cap.
    let under = |names: &[&str]| {
        Isa::available().filter(|i| names.contains(&i.name())).last().map_or("portable (no SIMD)", Isa::name)
    };
    for (cap, paths) in [
        ("scalar", vec!["portable (no SIMD)"]),
        ("avx2", vec!["portable (no SIMD)", "AVX2"]),
        ("avx-512", vec!["portable (no SIMD)", "AVX2", "AVX-512"]),
    ] {
        let out = gantry(cap, &["devices"]);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{cap}: {stderr}");
        let line =
            stdout.lines().find(|l| l.trim_start().starts_with("kernels: ")).unwrap_or_else(|| panic!("{stdout}"));
        let want = format!("kernels: {} (capped by GANTRY_CPU_ISA=", under(&paths));
        assert!(line.trim_start().starts_with(&want), "{cap}: {line:?}, want {want:?}");
    }
}

#[test]
fn a_cap_that_names_no_path_is_an_error() {
    for args in [&["devices"][..], &["--layers", "1", "-n", "1", "--backends", "cpu"][..]] {
        let out = gantry("sse9", args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains("GANTRY_CPU_ISA=\"sse9\" names no kernel path"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
