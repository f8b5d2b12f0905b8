#!/usr/bin/env python3
"""`gantry serve` under load, beside llama.cpp's `llama-server` on the same
model, machine and settings (issue 39's measurement; a script, never a test).

Both servers run at once (idle while the other is measured); for each
client count N, on one and then the other: N clients send
streamed chat requests back to back for --duration seconds, with prompt
lengths and reply lengths drawn from a fixed seed (`ignore_eos`, so every
reply is as long as asked on both servers). Reported per row: requests/s,
generated tokens/s (all clients together), time to first token p50/p99,
inter-token latency p50/p99, failed requests; and the server's RSS after
the warm-up and at the end. `--soak S` then runs 16 clients for S seconds
on Gantry and prints its RSS at the start and the end.

    scripts/bench_serve.py --model M.gguf [--parallel 16] [--ctx 8192] [--threads 2]
        [--clients 1,4,16,64] [--duration 30] [--llama-server PATH] [--soak 600]

`--llama-server` defaults to the native build of scripts/build_llamacpp_native.sh
(built with `LLAMACPP_SERVER=1`); without one, only Gantry is measured.
"""

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("the of and to in is was for on that with as by at from his her an were which be this are or had not "
         "but what all when can there one been if more would their so who will about up out many then them these "
         "some time could into two has other than first water been call people over day did number now long "
         "river mountain city garden music story engine window paper light stone").split()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def wait_healthy(port, proc, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            sys.exit(f"the server exited ({proc.returncode}) before it was ready")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("the server never became healthy")


def one_request(port, model, prompt, max_tokens, seed):
    """A streamed chat: (ok, ttft, [inter-token gaps], tokens)."""
    body = json.dumps({
        "model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
        "stream": True, "temperature": 0.8, "seed": seed, "ignore_eos": True,
    })
    t0 = time.perf_counter()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        c.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            r.read()
            return False, None, [], 0
        ttft, last, gaps, tokens, done = None, None, [], 0, False
        for raw in r:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                return False, None, [], 0
            choices = chunk.get("choices") or []
            if not choices or choices[0].get("delta", {}).get("content") is None:
                continue
            now = time.perf_counter()
            if ttft is None:
                ttft = now - t0
            else:
                gaps.append(now - last)
            last = now
            tokens += 1
        c.close()
        return done, ttft, gaps, tokens
    except OSError:
        return False, None, [], 0


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def load(port, model, n_clients, duration, seed):
    rng = random.Random(seed)
    stop_at = time.time() + duration
    lock = threading.Lock()
    stats = {"ok": 0, "failed": 0, "tokens": 0, "ttft": [], "itl": []}

    def client(k):
        r = random.Random(rng.random() + k)
        while time.time() < stop_at:
            n_words = r.choice([8, 32, 64, 128, 256, 384])
            prompt = " ".join(r.choice(WORDS) for _ in range(n_words))
            ok, ttft, gaps, tokens = one_request(port, model, prompt, r.choice([32, 64, 128]), r.randrange(1 << 30))
            with lock:
                if ok:
                    stats["ok"] += 1
                    stats["tokens"] += tokens
                    stats["ttft"].append(ttft)
                    stats["itl"].extend(gaps)
                else:
                    stats["failed"] += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    return {"clients": n_clients, "req_s": stats["ok"] / wall, "tok_s": stats["tokens"] / wall,
            "ttft_p50": pct(stats["ttft"], 50), "ttft_p99": pct(stats["ttft"], 99),
            "itl_p50": pct(stats["itl"], 50), "itl_p99": pct(stats["itl"], 99),
            "failed": stats["failed"], "requests": stats["ok"]}


def start_gantry(args, port):
    exe = args.gantry or str(ROOT / "target" / "release" / "gantry")
    cmd = [exe, "serve", "-m", args.model, "--port", str(port), "-P", str(args.parallel), "-c", str(args.ctx),
           "-t", str(args.threads), "--backends", "cpu", "-b", "512", "--queue", "1024", "--alias", "bench"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_llama(args, port):
    cmd = [args.llama_server, "-m", args.model, "--port", str(port), "--host", "127.0.0.1", "-np", str(args.parallel),
           "-c", str(args.ctx), "-t", str(args.threads), "-tb", str(args.threads), "-b", "512", "--alias", "bench",
           "--no-webui"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main_rows(servers, args):
    """Both servers up at once; each row runs on one, then the other (the same minute of the machine)."""
    procs = {}
    try:
        for name, start in servers:
            port = free_port()
            procs[name] = (start(args, port), port)
        for name, (proc, port) in procs.items():
            wait_healthy(port, proc)
            load(port, "bench", 2, 5, 0)  # warm-up
        rss0 = {name: rss_mib(proc.pid) for name, (proc, _) in procs.items()}
        rows = {name: [] for name in procs}
        for n in args.clients:
            for name, (proc, port) in procs.items():
                row = load(port, "bench", n, args.duration, 1234 + n)
                rows[name].append(row)
                print(f"  {name:12} N={n:3}: {row['req_s']:6.2f} req/s {row['tok_s']:8.1f} tok/s  "
                      f"TTFT p50 {row['ttft_p50'] * 1e3:7.0f} ms p99 {row['ttft_p99'] * 1e3:7.0f} ms  "
                      f"ITL p50 {row['itl_p50'] * 1e3:6.1f} ms p99 {row['itl_p99'] * 1e3:6.1f} ms  "
                      f"failed {row['failed']}", flush=True)
        rss1 = {name: rss_mib(proc.pid) for name, (proc, _) in procs.items()}
        soak = None
        if args.soak:
            proc, port = procs["gantry"]
            s0 = rss_mib(proc.pid)
            row = load(port, "bench", 16, args.soak, 99)
            soak = (s0, rss_mib(proc.pid), row)
        return rows, rss0, rss1, soak
    finally:
        for proc, _ in procs.values():
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=16384)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--soak", type=float, default=0)
    ap.add_argument("--gantry")
    default_llama = Path(os.environ.get("LLAMACPP_NATIVE_DIR",
                                        Path.home() / ".cache" / "gantry" / "llamacpp-native")) / "build" / "bin" / "llama-server"
    ap.add_argument("--llama-server", default=str(default_llama))
    args = ap.parse_args()
    args.clients = [int(x) for x in args.clients.split(",")]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"# {time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} cores; model {Path(args.model).name}; "
          f"--parallel {args.parallel}, context {args.ctx}, {args.threads} threads, {args.duration:.0f} s per row")
    servers = [("gantry", start_gantry)]
    if Path(args.llama_server).is_file():
        servers.append(("llama-server", start_llama))
    else:
        print(f"# no llama-server at {args.llama_server}: Gantry alone")
    rows, rss0, rss1, soak = main_rows(servers, args)
    print("\n| clients | server | req/s | gen tok/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | failed |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, n in enumerate(args.clients):
        for name in rows:
            r = rows[name][i]
            print(f"| {n} | {name} | {r['req_s']:.2f} | {r['tok_s']:.1f} | {r['ttft_p50'] * 1e3:.0f} ms | "
                  f"{r['ttft_p99'] * 1e3:.0f} ms | {r['itl_p50'] * 1e3:.1f} ms | {r['itl_p99'] * 1e3:.1f} ms | "
                  f"{r['failed']} |")
        if "llama-server" in rows:
            g, l = rows["gantry"][i], rows["llama-server"][i]
            print(f"|  | gantry / llama-server | {g['req_s'] / max(l['req_s'], 1e-9):.2f}x | "
                  f"{g['tok_s'] / max(l['tok_s'], 1e-9):.2f}x | {g['ttft_p50'] / l['ttft_p50']:.2f}x | "
                  f"{g['ttft_p99'] / l['ttft_p99']:.2f}x | {g['itl_p50'] / l['itl_p50']:.2f}x | "
                  f"{g['itl_p99'] / l['itl_p99']:.2f}x | |")
    for name in rows:
        print(f"# {name} RSS after the warm-up {rss0[name]:.0f} MiB, after the rows {rss1[name]:.0f} MiB")
    if soak:
        s0, s1, row = soak
        print(f"# soak: gantry, 16 clients for {args.soak:.0f} s: RSS {s0:.0f} MiB at the start, {s1:.0f} MiB at the end; "
              f"{row['requests']} requests, {row['failed']} failed, {row['tok_s']:.1f} tok/s")


if __name__ == "__main__":
    main()
