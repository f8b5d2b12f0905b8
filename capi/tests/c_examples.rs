//! The C programs in `capi/examples/`, compiled with the system's `cc`
//! under AddressSanitizer against the library cargo built, and run: each
//! exits 0 only when its checks hold. Skipped, saying why, without a `cc`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The folder with the `libgantry_capi.so` built with this test: the test
/// binary's own `deps/` (cargo uplifts it to `target/<profile>/` only for
/// `cargo build`, so the copy there may be older).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("target/<profile>/deps").to_path_buf();
    if deps.join("libgantry_capi.so").is_file() { deps } else { deps.parent().map(Path::to_path_buf).unwrap_or(deps) }
}

/// Whether a C compiler is on PATH (why not, if not). CI (`CI` set) installs
/// one, so there a missing compiler fails instead of skipping.
fn c_compiler() -> Result<(), String> {
    let found = match Command::new("cc").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("`cc --version` failed: {}", String::from_utf8_lossy(&o.stderr))),
        Err(e) => Err(format!("no `cc` on PATH ({e})")),
    };
    if let Err(why) = &found {
        assert!(std::env::var_os("CI").is_none(), "CI must compile the C examples: {why}");
    }
    found
}

/// Compiles `examples/{name}.c` into the test's temporary folder.
fn compile(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = library_dir();
    assert!(
        lib.join("libgantry_capi.so").is_file(),
        "{} has no libgantry_capi.so (cargo builds the cdylib with the tests)",
        lib.display()
    );
    let out = std::env::temp_dir().join(format!("gantry-capi-{name}-{}", std::process::id()));
    let status = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"])
        .arg("-I")
        .arg(dir.join("include"))
        .arg(dir.join("examples").join(format!("{name}.c")))
        .arg("-o")
        .arg(&out)
        .arg("-L")
        .arg(&lib)
        .arg("-lgantry_capi")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lm")
        .arg("-pthread")
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed on examples/{name}.c");
    out
}

/// Runs a compiled example; panics with its output unless it exits 0.
fn run(exe: &Path, args: &[&str]) -> String {
    let Output { status, stdout, stderr } = Command::new(exe)
        .args(args)
        // The library linked in (its run path), not whichever one cargo's
        // LD_LIBRARY_PATH for tests finds first (`target/<profile>/` may
        // hold an older copy than `deps/`).
        .env_remove("LD_LIBRARY_PATH")
        // Leaks are checked too; a sanitizer report makes the program fail.
        .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:exitcode=23")
        // No GPU API is probed (the examples compute on the CPU): Mesa's
        // Vulkan and EGL drivers, which wgpu's probe loads and unloads, leak
        // 128 bytes each from a one-time initializer, and once unloaded their
        // frames are `<unknown module>` to LeakSanitizer, which no
        // suppression can name. Our own leaks are still all reported.
        .env("WGPU_BACKEND", "none")
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stderr);
    eprintln!("--- {} stdout:\n{stdout}--- stderr:\n{stderr}", exe.display());
    assert!(status.success(), "{} exited with {status}", exe.display());
    stdout
}

#[test]
fn graph_c_computes_a_hand_built_graph_and_rejects_misuse() {
    if let Err(why) = c_compiler() {
        eprintln!("skipped: {why}");
        return;
    }
    let exe = compile("graph");
    let out = run(&exe, &[]);
    assert!(out.contains("numbers ok"), "{out}");
    assert!(out.contains("graph.c: all checks hold"), "{out}");
    let _ = std::fs::remove_file(exe);
}

/// The greedy continuation the Rust API produces for the same prompt and settings.
fn rust_continuation(path: &Path) -> String {
    use gantry::model::decoder::{DecoderModel, LogitsFor, Session, SessionParams};
    use gantry::{Context, DType, Registry, RegistryDefaults};
    let registry = Registry::with_defaults().unwrap();
    let backends = registry.backends_by_priority().unwrap();
    let mut ctx = Context::new();
    let model = DecoderModel::load(path, &mut ctx, backends[0].device(), None).unwrap();
    let ids = model.tokenizer.encode("The capital of France is", false, true).unwrap();
    let params = SessionParams { n_ctx: 256, kv_dtype: DType::F32, ..SessionParams::default() };
    let mut session = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params).unwrap();
    let argmax = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0 as u32;
    let mut next = argmax(session.eval(&mut ctx, &ids, LogitsFor::Last).unwrap());
    let mut out = vec![next];
    while out.len() < 10 {
        next = argmax(session.eval(&mut ctx, &[next], LogitsFor::Last).unwrap());
        out.push(next);
    }
    model.tokenizer.decode_string(&out, false, false).unwrap()
}

#[test]
fn generate_c_continues_the_capital_of_france_as_the_rust_api_does() {
    if let Err(why) = c_compiler() {
        eprintln!("skipped: {why}");
        return;
    }
    let path = match gantry::model::fetch::smollm2_path() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("skipped: SmolLM2 could not be had: {e}");
            return;
        }
    };
    let exe = compile("generate");
    let out = run(&exe, &[path.to_str().expect("UTF-8 model path")]);
    let expected = rust_continuation(&path);
    let line = format!("continuation: \"{expected}\"");
    assert!(out.contains(&line), "C printed:\n{out}\nthe Rust API's greedy continuation is {expected:?}");
    let _ = std::fs::remove_file(exe);
}
