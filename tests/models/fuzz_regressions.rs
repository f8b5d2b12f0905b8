//! Replays the model layer's fuzz targets (`fuzz/fuzz_targets/{model_loader,
//! bert_folder,chat_template}.rs`) over the inputs kept for them, through the
//! same harnesses (`gantry::fuzzing`): the inputs each once failed on
//! (`fuzz/regressions/<target>/`), which must now pass, and the seeds
//! (`fuzz/seeds/<target>/`), which must be the harness's own
//! `seed_inputs()` and load and run.
//!
//! An input that still fails (its fix not landed yet) is listed in [`OPEN`]:
//! the folder's test skips it, and a test of its own, marked `#[ignore =
//! "issue N: ..."]`, replays it (`cargo test ... -- --ignored`) until the
//! fix lands. A failure that aborts the process (an allocation the size of
//! the input's wildest number) would take every other test of this binary
//! with it, so it must not run unasked. The four inputs the first runs
//! found (minijinja's `range` overflowing, a template taking 1.7 GB before
//! its fuel ran out, a BERT `max_position_embeddings` below the special
//! tokens) were fixed in 33e76c9 and are replayed with the rest.

use std::path::{Path, PathBuf};

use gantry::fuzzing::{Outcome, bert_folder, chat_template, model_loader};

type Harness = fn(&[u8]) -> Result<Outcome, String>;

/// Kept inputs that still fail, as `target/file`: each has an ignored test of its own.
const OPEN: &[&str] = &[];

fn dir(kind: &str, target: &str) -> PathBuf {
    gantry::testing::repo_root().join("fuzz").join(kind).join(target)
}

/// The files of `dir`, sorted, without dot files (`.keep`).
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    entries.retain(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')));
    entries.sort();
    entries
}

fn replay(path: &Path, harness: Harness) -> Outcome {
    let bytes = std::fs::read(path).unwrap();
    match harness(&bytes) {
        Ok(outcome) => outcome,
        Err(broken) => panic!("{}: {broken}", path.display()),
    }
}

/// Every kept regression of `target` but the open ones.
fn regressions_pass(target: &str, harness: Harness) {
    for path in inputs(&dir("regressions", target)) {
        let name = format!("{target}/{}", path.file_name().unwrap().to_string_lossy());
        if !OPEN.contains(&name.as_str()) {
            replay(&path, harness);
        }
    }
}

/// The seed files are the harness's seeds, and each loads and runs.
fn seeds_run(target: &str, harness: Harness, seeds: Vec<(&'static str, Vec<u8>)>) {
    let folder = dir("seeds", target);
    assert_eq!(inputs(&folder).len(), seeds.len(), "{}: one file per seed", folder.display());
    for (name, bytes) in seeds {
        let path = folder.join(name);
        assert_eq!(std::fs::read(&path).ok().as_ref(), Some(&bytes), "{} is not the harness's seed", path.display());
        assert_eq!(replay(&path, harness), Outcome::Ran, "{}", path.display());
    }
}

#[test]
fn model_loader_regressions_pass() {
    regressions_pass("model_loader", model_loader::run);
}

#[test]
fn model_loader_seeds_load_and_run() {
    seeds_run("model_loader", model_loader::run, model_loader::seed_inputs());
}

#[test]
fn bert_folder_regressions_pass() {
    regressions_pass("bert_folder", bert_folder::run);
}

#[test]
fn bert_folder_seeds_load_and_embed() {
    seeds_run("bert_folder", bert_folder::run, bert_folder::seed_inputs());
}

#[test]
fn chat_template_regressions_pass() {
    regressions_pass("chat_template", chat_template::run);
}

#[test]
fn chat_template_seeds_render() {
    seeds_run("chat_template", chat_template::run, chat_template::seed_inputs());
}

/// Hostile templates beside the kept regressions: strings and lists that
/// double in a loop or a recursive macro (minijinja 3.1 copies a list built
/// by 33 nested `+` or `chain` without fuel: 2^33 items, until the process
/// ran out of memory), one huge repetition, many long lines.
const GREEDY_TEMPLATES: [&str; 6] = [
    "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}",
    "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l|chain(ns.l) %}{% endfor %}{{ ns.l|length }}",
    "{% set ns = namespace(x='user') %}{% for i in range(64) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}{{ ns.x|length }}",
    "{% macro m(x) %}{{ m(x ~ x) }}{% endmacro %}{{ m('user') }}",
    "{{ ('ab' * 1000000000)|length }}",
    "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
];

/// The most heap a render of a short chat may take: the fuel (2^18 for a
/// short chat, 64 bytes of data a unit) bounds the data a template
/// creates, so a hostile template peaks near 16 MiB; real ones take a few
/// KB. (Before renders got fuel by their conversation, the first kept
/// regression peaked at 674 MB, then 408 MB with minijinja 3.1's fuel at
/// 2^22.)
const MAX_RENDER_HEAP: usize = 48 << 20;

/// Every kept chat-template input and the greedy templates stay under
/// [`MAX_RENDER_HEAP`] (this binary's allocator measures the thread's peak).
#[test]
fn chat_template_memory_is_bounded_by_the_conversation() {
    use gantry::engine::testing::CountingAllocator;
    use gantry::model::chat_template::{ChatMessage, ChatTemplate};

    let chat = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "hi")];
    for template in GREEDY_TEMPLATES {
        let (result, peak) = CountingAllocator::peak_bytes(|| {
            ChatTemplate::new("greedy", template, "<s>", "</s>").unwrap().render(&chat, true)
        });
        let error = result.expect_err(template).to_string();
        assert!(error.contains("fuel") || error.contains("grew past"), "{template}: {error}");
        assert!(peak < MAX_RENDER_HEAP, "{template}: a peak of {peak} bytes");
        println!("{peak:>10} bytes at most: {template}");
    }
    for path in inputs(&dir("regressions", "chat_template")) {
        let bytes = std::fs::read(&path).unwrap();
        let (outcome, peak) = CountingAllocator::peak_bytes(|| chat_template::run(&bytes));
        outcome.unwrap_or_else(|broken| panic!("{}: {broken}", path.display()));
        assert!(peak < MAX_RENDER_HEAP, "{}: a peak of {peak} bytes", path.display());
        println!("{peak:>10} bytes at most: {}", path.display());
    }
}
