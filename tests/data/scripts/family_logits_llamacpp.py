"""usage: family_logits_llamacpp.py MODELS_DIR OUT_DIR

llama.cpp's next-token log-probabilities at every position of the seeded
prompt, for every seeded random-weight model in MODELS_DIR (written by
`cargo run --release -p gantry --example write_seeded_models -- MODELS_DIR`).
llama.cpp runs through the prebuilt `xllamacpp` wheel (`pip install
xllamacpp`; an AVX2 build, which is fine for correctness): for each prefix of
the prompt it is asked for one token with `n_probs` = the whole vocabulary
and `post_sampling_probs` off, which gives log_softmax of its raw logits
(the one sampled token forced to "A", which those do not see).

Writes OUT_DIR/<stem>.logprobs (f32 little-endian, [17][vocab], row p = the
distribution after prompt[0..=p]) and OUT_DIR/manifest.json, which records
the prompt, the engine and each file's size and FNV-1a 64 hash, so the test
can check that Gantry still writes the very bytes llama.cpp ran on. An
existing manifest keeps the entries of files not in MODELS_DIR (a new
family's references are added without rerunning the others'); it must be
of the same prompt, vocabulary and engine."""
import json, math, os, struct, sys

import xllamacpp as xlc

# gantry::testing::seeded_model::SEEDED_PROMPT and SEEDED_VOCAB.
PROMPT = [300, 72, 101, 270, 111, 32, 263, 119, 180, 114, 300, 100, 33, 290, 311, 72, 58]
VOCAB = 320


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def logprobs(path):
    p = xlc.CommonParams()
    p.model.path = path
    p.n_ctx = 256
    p.cpuparams.n_threads = 2
    p.cpuparams_batch.n_threads = 2
    srv = xlc.Server(p)
    rows = []
    for n in range(1, len(PROMPT) + 1):
        r = srv.handle_completions({"prompt": PROMPT[:n], "max_tokens": 1, "temperature": 0.0,
                                    "n_probs": VOCAB, "post_sampling_probs": False,
                                    # The reply is held back while its text is an incomplete UTF-8
                                    # sequence (a lone byte token), logprobs and all: sample "A"
                                    # always. The bias acts on the sampler's copy; the listed
                                    # log-probabilities are the raw logits' (checked: equal with
                                    # and without it).
                                    "logit_bias": [[65, 100.0]]})
        assert r["usage"]["prompt_tokens"] == n, r["usage"]
        top = r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        row = [None] * VOCAB
        for t in top:
            row[t["id"]] = t["logprob"]
        assert all(v is not None for v in row), f"{path}: llama.cpp listed {len(top)} of {VOCAB} tokens"
        rows.append(row)
    del srv
    return rows


def main():
    models, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    manifest = {"engine": f"llama.cpp through xllamacpp {getattr(xlc, '__version__', '?')}, CPU, 2 threads",
                "prompt": PROMPT, "vocab": VOCAB, "files": {}}
    old_path = os.path.join(out, "manifest.json")
    if os.path.exists(old_path):
        old = json.load(open(old_path))
        same = {k: old.get(k) for k in ("engine", "prompt", "vocab")} == {k: manifest[k] for k in ("engine", "prompt", "vocab")}
        assert same, f"{old_path} is of another engine, prompt or vocabulary: rerun every family into an empty folder"
        manifest["files"] = old["files"]
    for name in sorted(os.listdir(models)):
        if not name.endswith(".gguf"):
            continue
        stem = name[:-5]
        path = os.path.join(models, name)
        data = open(path, "rb").read()
        rows = logprobs(path)
        with open(os.path.join(out, stem + ".logprobs"), "wb") as f:
            for row in rows:
                f.write(struct.pack(f"<{VOCAB}f", *row))
        manifest["files"][stem] = {"bytes": len(data), "fnv1a64": fnv1a64(data)}
        tops = [math.exp(max(row)) for row in rows]
        print(f"{stem}: most likely token's probability per position:", " ".join(f"{t:.2f}" for t in tops))
    manifest["files"] = dict(sorted(manifest["files"].items()))
    json.dump(manifest, open(os.path.join(out, "manifest.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
