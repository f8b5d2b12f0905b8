"""usage: llama_float64_forward.py MODELS_DIR FAMILIES_DIR OUT_DIR

A float64 numpy forward of the `llama` architecture, for what llama.cpp
does not compute: a llama file with `llama.attention.sliding_window`
(Mistral 7B's sliding-window attention; llama.cpp's `llama` graph has no
window and ignores the key). Reads the seeded GGUF files Gantry writes
(`cargo run --release -p gantry --example write_seeded_models -- MODELS_DIR`),
dequantized by the `gguf` PyPI package (ggml's reference dequantizers).

The forward is llama.cpp's `llm_build_llama` in float64: RMS norms, rope on
adjacent pairs (GGML_ROPE_TYPE_NORM), grouped-query attention scaled by
1/sqrt(head_dim), causal, and with a window W a query at position i sees
keys i-W+1..i (llama.cpp's standard SWA rule, `p1 - p0 >= n_swa` masked, as
Hugging Face's Mistral), SwiGLU, the output norm and matrix.

First it checks itself against llama.cpp: on every `llama-*.gguf` in
MODELS_DIR (no window) its log-probabilities must be within KL 1e-4
(F32 file) of llama.cpp's stored ones in FAMILIES_DIR. Then it writes
OUT_DIR/<stem>.logprobs (f32 little-endian, [17][vocab]) for every
`mistral-*.gguf`, and OUT_DIR/manifest.json (prompt, engine, each file's
size and FNV-1a 64 hash, as tests/data/families/manifest.json)."""
import json, math, os, struct, sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

# gantry::testing::seeded_model::SEEDED_PROMPT and SEEDED_VOCAB.
PROMPT = [300, 72, 101, 270, 111, 32, 263, 119, 180, 114, 300, 100, 33, 290, 311, 72, 58]
VOCAB = 320


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def load(path):
    reader = GGUFReader(path)
    tensors = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))  # numpy order: rows first
        tensors[t.name] = dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
    return reader, tensors


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_adjacent(x, base):
    # x: [tokens, heads, head_dim]; pairs (2i, 2i+1) turn by pos * base^(-2i/d).
    n, _, d = x.shape
    pos = np.arange(n, dtype=np.float64)[:, None]
    theta = pos * base ** (-np.arange(0, d, 2, dtype=np.float64) / d)[None, :]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


def forward(path):
    reader, w = load(path)
    arch = field(reader, "general.architecture")
    assert arch == "llama", f"{path}: {arch}"
    key = lambda k, d=None: field(reader, f"llama.{k}", d)
    n_layer, n_head, n_head_kv = key("block_count"), key("attention.head_count"), key("attention.head_count_kv")
    eps, base, window = key("attention.layer_norm_rms_epsilon"), key("rope.freq_base"), key("attention.sliding_window", 0)
    assert "rope_freqs.weight" not in w and key("expert_count", 0) == 0, f"{path}: not a plain llama"
    x = w["token_embd.weight"][PROMPT]
    n = len(PROMPT)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    allowed = (j <= i) & ((window == 0) | (i - j < window))
    for l in range(n_layer):
        p = lambda s: w[f"blk.{l}.{s}"]
        h = rms_norm(x, p("attn_norm.weight"), eps)
        q, k, v = h @ p("attn_q.weight").T, h @ p("attn_k.weight").T, h @ p("attn_v.weight").T
        hd = q.shape[1] // n_head
        q = rope_adjacent(q.reshape(n, n_head, hd), base)
        k = rope_adjacent(k.reshape(n, n_head_kv, hd), base)
        v = v.reshape(n, n_head_kv, hd)
        out = np.empty((n, n_head, hd))
        for hh in range(n_head):
            kv = hh // (n_head // n_head_kv)
            s = q[:, hh, :] @ k[:, kv, :].T / math.sqrt(hd)
            s = np.where(allowed, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, hh, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, kv, :]
        x = x + out.reshape(n, n_head * hd) @ p("attn_output.weight").T
        h = rms_norm(x, p("ffn_norm.weight"), eps)
        g, u = h @ p("ffn_gate.weight").T, h @ p("ffn_up.weight").T
        x = x + (g / (1.0 + np.exp(-g)) * u) @ p("ffn_down.weight").T
    logits = rms_norm(x, w["output_norm.weight"], eps) @ w["output.weight"].T
    m = logits.max(axis=1, keepdims=True)
    return logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))


def kl(p_log, q_log):
    return float(np.max(np.sum(np.exp(p_log) * (p_log - q_log), axis=1)))


def main():
    models, families, out = sys.argv[1], sys.argv[2], sys.argv[3]
    for name in sorted(os.listdir(models)):
        if name.startswith("llama-") and name.endswith(".gguf"):
            stem = name[:-5]
            ref = np.frombuffer(open(os.path.join(families, stem + ".logprobs"), "rb").read(), "<f4")
            ref = ref.reshape(len(PROMPT), VOCAB).astype(np.float64)
            worst = kl(ref, forward(os.path.join(models, name)))
            print(f"self-check {stem}: worst KL(llama.cpp || float64) {worst:.2e}")
            if stem == "llama-f32":
                assert worst < 1e-4, "the float64 forward disagrees with llama.cpp"
    os.makedirs(out, exist_ok=True)
    manifest = {"engine": "float64 numpy forward (tests/data/scripts/llama_float64_forward.py), gguf "
                + __import__("importlib.metadata").metadata.version("gguf"),
                "prompt": PROMPT, "vocab": VOCAB, "files": {}}
    for name in sorted(os.listdir(models)):
        if not (name.startswith("mistral-") and name.endswith(".gguf")):
            continue
        stem, path = name[:-5], os.path.join(models, name)
        rows = forward(path)
        with open(os.path.join(out, stem + ".logprobs"), "wb") as f:
            f.write(rows.astype("<f4").tobytes())
        data = open(path, "rb").read()
        manifest["files"][stem] = {"bytes": len(data), "fnv1a64": fnv1a64(data)}
        print(f"{stem}: most likely token's probability per position:",
              " ".join(f"{math.exp(r.max()):.2f}" for r in rows))
    json.dump(manifest, open(os.path.join(out, "manifest.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
