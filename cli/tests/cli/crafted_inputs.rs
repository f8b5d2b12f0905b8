//! The `gantry` command on crafted inputs: sizes past the limits on the
//! command line (`bench -p`, `run -n`) and in a model file (a layer count of
//! 2^32 − 1 with `--budget`), a chat template that loops, end in an error
//! naming the flag, key or template, with exit status 1 (no panic, no
//! abort); `--no-mmap` loads and runs as the mapped file does. The models
//! are tiny GGUF files written here.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use gantry::DType;
use gantry::model::gguf::{Array, GgufWriter};

/// A scratch folder for one test, removed when it drops (pass or fail).
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("gantry-cli-crafted-").tempdir().unwrap()
}

/// A one-layer llama of width 32 and vocabulary 8 with `block_count` as given.
fn tiny_llama(path: &Path, block_count: u32) {
    let (e, ff, n_vocab) = (32usize, 64usize, 8usize);
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", "llama");
    w.add_u32("llama.embedding_length", e as u32);
    w.add_u32("llama.block_count", block_count);
    w.add_u32("llama.attention.head_count", 2);
    w.add_u32("llama.feed_forward_length", ff as u32);
    w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5);
    w.add_str("tokenizer.ggml.model", "llama");
    let tokens: Vec<String> = ["<unk>", "<s>", "</s>", "▁", "a", "b", "c", "d"].map(String::from).to_vec();
    w.add_array("tokenizer.ggml.tokens", Array::String(tokens));
    w.add_array("tokenizer.ggml.token_type", Array::I32(vec![2, 3, 3, 1, 1, 1, 1, 1]));
    w.add_array("tokenizer.ggml.scores", Array::F32(vec![0.0; n_vocab]));
    let mut tensors = vec![("token_embd.weight".to_string(), vec![e, n_vocab]), ("output_norm.weight".into(), vec![e])];
    for (n, dims) in [
        ("attn_norm", vec![e]),
        ("attn_q", vec![e, e]),
        ("attn_k", vec![e, e]),
        ("attn_v", vec![e, e]),
        ("attn_output", vec![e, e]),
        ("ffn_norm", vec![e]),
        ("ffn_gate", vec![e, ff]),
        ("ffn_up", vec![e, ff]),
        ("ffn_down", vec![ff, e]),
    ] {
        tensors.push((format!("blk.0.{n}.weight"), dims));
    }
    for (name, dims) in &tensors {
        let n: usize = dims.iter().product();
        let value = |i: usize| if dims.len() == 1 { 1.0f32 } else { ((i % 7) as f32 - 3.0) * 0.01 };
        w.add_tensor(name, dims, DType::F32, (0..n).flat_map(|i| value(i).to_le_bytes()).collect()).unwrap();
    }
    std::fs::write(path, w.to_bytes()).unwrap();
}

fn gantry(args: &[&str], model: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .args(["--backends", "cpu", "-t", "1", "--model"])
        .arg(model)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Exit status 1 with `want` in the message: an error, not a panic (101) or an abort (a signal).
fn assert_error(out: &Output, want: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for w in want {
        assert!(stderr.contains(w), "no {w:?} in: {stderr}");
    }
}

#[test]
fn lengths_past_the_limits_on_the_command_line_are_errors() {
    let dir = scratch();
    let model = dir.path().join("tiny.gguf");
    tiny_llama(&model, 1);
    let max = usize::MAX.to_string();
    assert_error(&gantry(&["bench", "-p", &max, "-n", "1", "-r", "1"], &model), &["-p/--n-prompt", &max]);
    assert_error(&gantry(&["bench", "-p", "1", "-d", "16777216", "-n", "16777216"], &model), &["KV cache"]);
    assert_error(&gantry(&["bench", "-p", "1", "--parallel", &max], &model), &["--parallel"]);
    assert_error(&gantry(&["run", "-p", "a", "-n", &max], &model), &["-n/--n-predict"]);
    assert_error(&gantry(&["run", "-p", "a", "-c", &max], &model), &["-c/--ctx-size"]);
    assert_error(&gantry(&["bench", "-p", "1", "--parallel", "100000"], &model), &["--parallel 100000"]);
    assert_error(&gantry(&["bench", "-p", "1", "--parallel", "0"], &model), &["--parallel 0"]);
    assert_error(&gantry(&["bench", "-p", "0", "-n", "0"], &model), &["nothing to measure"]);
    // A batch of no sentences measured nothing and said nothing (an empty table, a lone `]` as JSON).
    assert_error(&gantry(&["bench", "-b", "0,2"], &model), &["-b/--embed-batch 0"]);
    let out = gantry(&["bench", "-p", "1", "-n", "1", "-r", "0"], &model);
    assert_eq!(out.status.code(), Some(2), "bench -r 0: {}", String::from_utf8_lossy(&out.stderr));
    // -n 0: the prompt's step alone, and no decode rate made up for it.
    let out = gantry(&["run", "-p", "a", "-n", "0"], &model);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("decode: no decode steps"), "{stderr}");
}

#[test]
fn a_huge_layer_count_with_a_budget_is_an_error_naming_the_key() {
    let dir = scratch();
    let model = dir.path().join("blocks.gguf");
    tiny_llama(&model, u32::MAX);
    let out = gantry(&["run", "-p", "a", "-n", "1", "--budget", "cpu=1G"], &model);
    assert_error(&out, &["llama.block_count", &model.display().to_string()]);
}

#[test]
fn a_chat_template_that_loops_ends_in_an_error_naming_it() {
    let dir = scratch();
    let model = dir.path().join("chat.gguf");
    tiny_llama(&model, 1);
    let template = dir.path().join("loop.jinja");
    std::fs::write(&template, "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}")
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["chat", "--backends", "cpu", "-t", "1", "--chat-template"])
        .arg(&template)
        .arg("--model")
        .arg(&model)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hi\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_error(&out, &["ran out of fuel", &template.display().to_string()]);
}

#[test]
fn no_mmap_gives_the_mapped_files_logits() {
    let dir = scratch();
    let model = dir.path().join("logits.gguf");
    tiny_llama(&model, 1);
    let logits = |extra: &[&str], out: &Path| {
        let mut args = vec!["logits", "-p", "abc", "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        let run = gantry(&args, &model);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        std::fs::read(out).unwrap()
    };
    let mapped = logits(&[], &dir.path().join("mapped.bin"));
    let read = logits(&["--no-mmap"], &dir.path().join("read.bin"));
    assert!(!mapped.is_empty());
    assert_eq!(mapped, read);
}

/// The second pass's findings on the command line: sampling values that are
/// not numbers in range, a schema file that is not a regular file, a chat
/// line without end on standard input, and output whose reader went away.
#[test]
fn flags_files_and_pipes_of_the_second_pass_are_errors() {
    let dir = scratch();
    let model = dir.path().join("tiny-second-pass.gguf");
    tiny_llama(&model, 1);
    for (flag, value) in [
        ("--temp", "NaN"),
        ("--temp", "-1"),
        ("--top-p", "inf"),
        ("--min-p", "2"),
        ("--repeat-penalty", "-3"),
        ("--repeat-penalty", "0"),
    ] {
        let out = gantry(&["run", "-p", "a", "-n", "1", &format!("{flag}={value}")], &model);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains(flag), "{flag} {value}");
    }
    // Server flags past their ranges (a queue of 2^32 slots, a timeout that overflows an instant).
    for (flag, value) in [
        ("--queue", "4294967296"),
        ("--timeout", "9223372036854775807"),
        ("--header-timeout", "18446744073709551615"),
        ("--max-connections", "2305843009213693952"),
        ("--shutdown-grace", "18446744073709551615"),
        ("--parallel", "100000"),
        ("--parallel", "0"),
    ] {
        let out = gantry(&["serve", flag, value], &model);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // A schema that is a device: refused before it is read.
    let out = gantry(&["run", "-p", "a", "-n", "1", "--json-schema", "/dev/zero"], &model);
    assert_error(&out, &["--json-schema /dev/zero", "not a regular file"]);

    // A chat line of 17 MiB without a newline.
    let mut child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["chat", "--backends", "cpu", "-t", "1", "--chat-template"])
        .arg(write_template(dir.path(), "plain.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}"))
        .arg("--model")
        .arg(&model)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The chat stops reading at the bound: the rest of the write may fail.
    let _ = stdin.write_all(&vec![b'a'; 17 << 20]);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_error(&out, &["standard input longer than 16777216 bytes"]);

    // Output whose reader is gone ends the process quietly (status 141, as SIGPIPE would).
    let mut child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["devices"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(141) || out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The third pass: a reply that cannot be written, a misspelt op, a
/// template file that does not parse, certificates of mixed authorities
/// and hosts no client could dial are errors naming what is wrong.
#[test]
fn output_ops_templates_and_certificates_of_the_third_pass_are_errors() {
    let dir = scratch();
    let model = dir.path().join("tiny-third-pass.gguf");
    tiny_llama(&model, 1);
    // bench's trace over the model it reads is refused too, before anything runs.
    let out =
        gantry(&["bench", "-p", "1", "-n", "1", "-r", "1", "--profile", "--trace", model.to_str().unwrap()], &model);
    assert_error(&out, &["--trace", "the model reads"]);
    // logits' output over the model it reads (or a link to it) is refused
    // before the work, the model left whole.
    let before = std::fs::read(&model).unwrap();
    let link = dir.path().join("link.gguf");
    std::os::unix::fs::symlink(&model, &link).unwrap();
    for out in [&model, &link] {
        let out = gantry(&["logits", "-p", "a", "-o", out.to_str().unwrap()], &model);
        assert_error(&out, &["is the file the model reads"]);
    }
    assert_eq!(std::fs::read(&model).unwrap(), before);
    // A reply that cannot be written (a full disk) is an error, not status 0.
    if let Ok(full) = std::fs::File::options().write(true).open("/dev/full") {
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["run", "-p", "a", "-n", "2", "--backends", "cpu", "-t", "1", "--model"])
            .arg(&model)
            .stdout(full)
            .output()
            .unwrap();
        assert_error(&out, &["writing the reply to standard output"]);
        // The printing commands too: `println!`'s failure is an error, not a panic; the ops report is checked.
        for args in [&["devices"][..], &["test-ops", "--op", "ADD"], &["--help"], &["serve", "--help"]] {
            let full = std::fs::File::options().write(true).open("/dev/full").unwrap();
            let out = Command::new(env!("CARGO_BIN_EXE_gantry")).args(args).stdout(full).output().unwrap();
            assert_error(&out, &["writing", "standard output", "No space left on device"]);
        }
    }
    // Standard error on a full disk: status 1 (nothing left to say why), not a panic's 101.
    if let Ok(full) = std::fs::File::options().write(true).open("/dev/full") {
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["run", "-p", "a", "--backends", "cpu", "--model", "/nonexistent.gguf"])
            .stderr(full)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_gantry")).args(["test-ops", "--op", "ADD,NOPE"]).output().unwrap();
    assert_error(&out, &["--op NOPE", "MUL_MAT"]);
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["test-ops", "--op", "ADD", "--name", "no case is called this"])
        .output()
        .unwrap();
    assert_error(&out, &["no case of the suite matches"]);
    let bad = write_template(dir.path(), "bad.jinja", "{% for %}");
    let out = gantry(&["run", "-p", "a", "-n", "1", "--chat-template", bad.to_str().unwrap()], &model);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("invalid model file"), "{stderr}");

    let certs =
        |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_gantry")).arg("rpc-certs").args(args).output().unwrap();
    let (a, b) = (dir.path().join("pki-a"), dir.path().join("pki-b"));
    assert!(certs(&["--out", a.to_str().unwrap()]).status.success());
    // b holds a's certificate beside another key.
    std::fs::create_dir_all(&b).unwrap();
    std::fs::copy(a.join("ca.pem"), b.join("ca.pem")).unwrap();
    std::fs::copy(a.join("server.key"), b.join("ca.key")).unwrap();
    let out = certs(&["--out", b.to_str().unwrap(), "--add-client", "x"]);
    assert_error(&out, &["ca.pem", "does not belong to the authority certificate"]);
    assert!(!b.join("x.pem").exists(), "a certificate no server accepts was written");
    assert!(certs(&["--out", a.to_str().unwrap(), "--add-client", "x"]).status.success());
    // The authority's key moved away for safekeeping: a second run over the
    // folder is still refused, and its certificates stay as they were.
    let authority = std::fs::read_to_string(a.join("ca.pem")).unwrap();
    std::fs::rename(a.join("ca.key"), dir.path().join("ca.key.offline")).unwrap();
    assert_error(&certs(&["--out", a.to_str().unwrap()]), &["ca.pem exists", "invalidate"]);
    assert_eq!(std::fs::read_to_string(a.join("ca.pem")).unwrap(), authority);
    std::fs::rename(dir.path().join("ca.key.offline"), a.join("ca.key")).unwrap();
    let long = "x".repeat(66_000);
    let out = certs(&["--out", a.to_str().unwrap(), "--add-client", &long]);
    assert_error(&out, &["longer than the 64 characters"]);
    let out = certs(&["--out", dir.path().join("pki-c").to_str().unwrap(), "--hosts", "localhost,a b"]);
    assert_error(&out, &["\"a b\" is neither a DNS name nor an IP address"]);
}

fn write_template(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}
