//! The official chat templates of the model families, rendered by Gantry
//! and by llama.cpp (tests/data/chat_templates/, made by
//! tests/data/scripts/chat_templates_llamacpp.py through llama-server's
//! `/apply-template`): the same conversations must give the same prompt,
//! byte for byte. The templates are llama.cpp's copies, fetched from PyPI
//! into the model cache; the test skips, saying why, only when that is
//! impossible.

use gantry::model::chat_template::{ChatMessage, ChatTemplate};
use gantry::model::fetch;

/// One file per template: (stem, the reference JSON).
const REFERENCES: [(&str, &str); 14] = [
    ("meta-llama-Llama-3.1-8B-Instruct", include_str!("../data/chat_templates/meta-llama-Llama-3.1-8B-Instruct.json")),
    ("meta-llama-Llama-3.2-3B-Instruct", include_str!("../data/chat_templates/meta-llama-Llama-3.2-3B-Instruct.json")),
    ("Qwen-Qwen2.5-7B-Instruct", include_str!("../data/chat_templates/Qwen-Qwen2.5-7B-Instruct.json")),
    ("Qwen-Qwen3-0.6B", include_str!("../data/chat_templates/Qwen-Qwen3-0.6B.json")),
    ("microsoft-Phi-3.5-mini-instruct", include_str!("../data/chat_templates/microsoft-Phi-3.5-mini-instruct.json")),
    ("google-gemma-2-2b-it", include_str!("../data/chat_templates/google-gemma-2-2b-it.json")),
    (
        "mistralai-Mistral-Nemo-Instruct-2407",
        include_str!("../data/chat_templates/mistralai-Mistral-Nemo-Instruct-2407.json"),
    ),
    (
        "Mistral-Small-3.2-24B-Instruct-2506",
        include_str!("../data/chat_templates/Mistral-Small-3.2-24B-Instruct-2506.json"),
    ),
    ("openai-gpt-oss-120b", include_str!("../data/chat_templates/openai-gpt-oss-120b.json")),
    (
        "meta-llama-Llama-3.3-70B-Instruct",
        include_str!("../data/chat_templates/meta-llama-Llama-3.3-70B-Instruct.json"),
    ),
    ("Qwen-QwQ-32B", include_str!("../data/chat_templates/Qwen-QwQ-32B.json")),
    (
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
        include_str!("../data/chat_templates/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.json"),
    ),
    (
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
        include_str!("../data/chat_templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.json"),
    ),
    (
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
        include_str!("../data/chat_templates/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.json"),
    ),
];

fn message(v: &serde_json::Value) -> ChatMessage {
    let m = ChatMessage::new(v["role"].as_str().unwrap(), v["content"].as_str().unwrap());
    match v.get("reasoning_content").and_then(|r| r.as_str()) {
        Some(r) => m.with_reasoning(r),
        None => m,
    }
}

#[test]
fn model_chat_templates_render_as_llama_cpp_renders_them() {
    let mut failures = Vec::new();
    let mut compared = 0;
    for (stem, reference) in REFERENCES {
        let path = match fetch::llama_cpp_template_path(stem) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("SKIPPED: llama.cpp chat template {stem} could not be fetched: {e}");
                return;
            }
        };
        let data: serde_json::Value = serde_json::from_str(reference).expect("valid reference JSON");
        let bos = data["bos_token"].as_str().unwrap();
        let eos = data["eos_token"].as_str().unwrap();
        let template = ChatTemplate::from_file(&path, bos, eos).unwrap();
        // llama.cpp rendered with the date of that day.
        template.set_time(Some(data["now"].as_u64().unwrap()));
        for case in data["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let messages: Vec<ChatMessage> = case["messages"].as_array().unwrap().iter().map(message).collect();
            let generation_prompt = case["add_generation_prompt"].as_bool().unwrap();
            let want = case["prompt"].as_str().unwrap();
            compared += 1;
            match template.render(&messages, generation_prompt) {
                Ok(got) if got == want => {}
                Ok(got) => failures.push(format!("{stem} / {name}:\n--- Gantry\n{got}\n--- llama.cpp\n{want}\n---")),
                Err(e) => failures.push(format!("{stem} / {name}: {e}")),
            }
        }
    }
    eprintln!("{} of {compared} prompts equal to llama.cpp's", compared - failures.len());
    assert!(compared >= 80, "only {compared} conversations");
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// A conversation of `n` messages of `bytes` bytes each: a system message,
/// then users and assistants in turn.
fn conversation(n: usize, bytes: usize) -> Vec<ChatMessage> {
    (0..n)
        .map(|i| {
            let role = match i {
                0 => "system",
                i if i % 2 == 1 => "user",
                _ => "assistant",
            };
            let text: String =
                format!("message {i}: ").chars().chain("lorem ipsum ".chars().cycle()).take(bytes).collect();
            ChatMessage::new(role, &text)
        })
        .collect()
}

/// Every template of llama.cpp's `models/templates` that minijinja compiles
/// renders long conversations within the fuel Gantry gives a render (the
/// walks before comparisons and writes, and the paid `+`, cost fuel that
/// real templates must still have): none may run out of fuel. Templates
/// that refuse the conversation for their own reasons (a role order they do
/// not accept) are counted apart.
#[test]
fn llama_cpp_templates_render_long_conversations_within_their_fuel() {
    let dir = match fetch::llama_cpp_template_path(REFERENCES[0].0) {
        Ok(p) => p.parent().expect("a template's folder").to_owned(),
        Err(e) => {
            eprintln!("SKIPPED: llama.cpp's chat templates could not be fetched: {e}");
            return;
        }
    };
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
        .collect();
    paths.sort();
    let (mut rendered, mut refused, mut not_compiled) = (0, 0, 0);
    let mut out_of_fuel = Vec::new();
    for path in &paths {
        let Ok(template) = ChatTemplate::from_file(path, "<s>", "</s>") else {
            not_compiled += 1;
            continue;
        };
        for (n, bytes) in [(2, 100), (100, 1000), (300, 100)] {
            match template.render(&conversation(n, bytes), true) {
                Ok(_) => rendered += 1,
                Err(e) if e.to_string().contains("ran out of fuel") => {
                    out_of_fuel.push(format!("{} ({n} messages of {bytes} bytes): {e}", path.display()))
                }
                Err(_) => refused += 1,
            }
        }
    }
    eprintln!(
        "{} templates: {rendered} renders, {refused} refused by the template, {not_compiled} not compiled",
        paths.len()
    );
    assert!(rendered >= 150, "only {rendered} renders");
    assert!(out_of_fuel.is_empty(), "{}", out_of_fuel.join("\n"));
}
