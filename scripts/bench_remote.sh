#!/usr/bin/env bash
# SmolLM2-135M over two `gantry rpc-server` processes on loopback against the
# local CPU alone: prompt and decode tokens/s, bytes on the wire per decode
# token, and the load time with and without the servers' weight cache.
#
#   cargo build --release
#   scripts/bench_remote.sh [--threads N] [--rounds N]
#
# The model comes from the model cache ($GANTRY_MODEL_CACHE, else .cache/models;
# `cargo test` fetches it). Certificates are made in a temporary directory.
# Servers and the client take turns on the same cores: each server computes
# its layers with N threads while the others wait for it.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2
rounds=3
while [[ $# -gt 0 ]]; do
    case $1 in
        --threads) threads=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

gantry=target/release/gantry
model=${GANTRY_MODEL_CACHE:-.cache/models}/SmolLM2-135M-Instruct.Q4_1.gguf
[[ -x $gantry ]] || { echo "build first: cargo build --release" >&2; exit 1; }
[[ -f $model ]] || { echo "no model at $model (cargo test fetches it)" >&2; exit 1; }
# The prompt of scripts/bench_vs_llamacpp.py: 64 tokens.
prompt="The history of the bridge begins in the river valley, where the first settlers crossed on ferries and fords. Over three centuries the town grew around the crossing: merchants built warehouses on both banks, engineers replaced the wooden spans with stone arches, and the railway arrived with an iron bridge, painted red, that still carries"

tls=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tls"
}
trap cleanup EXIT
$gantry rpc-certs --out "$tls" >/dev/null
export GANTRY_REMOTE_TLS=$tls

# start_servers [rpc-server options...]: two servers on free ports; sets $remote.
start_servers() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    pids=()
    local addrs=()
    for i in 0 1; do
        local out=$tls/server$i.out
        $gantry rpc-server --listen 127.0.0.1:0 --threads "$threads" --cert "$tls/server.pem" --key "$tls/server.key" \
            --client-ca "$tls/ca.pem" "$@" >"$out" 2>"$tls/server$i.err" &
        pids+=($!)
        for _ in $(seq 100); do grep -qs listening "$out" && break; sleep 0.1; done
        addrs+=("$(awk '{print $5}' "$out")")
    done
    remote=$(IFS=,; echo "${addrs[*]}")
}

run() {
    $gantry run --model "$model" --prompt "$prompt" -n 64 --temp 0 --ignore-eos --warmup --quiet --threads "$threads" "$@" 2>&1
}

echo "== CPU alone ($threads threads)"
for _ in $(seq "$rounds"); do run --backends cpu | grep -E "prompt:|decode:"; done
echo "== two loopback servers ($threads threads each), no weight cache"
start_servers
for _ in $(seq "$rounds"); do run --remote "$remote" --backends remote0,remote1,cpu | grep -E "backends:|prompt:|decode:|wire:"; done
echo "== two loopback servers, weight cache (--weights $model)"
start_servers --weights "$model"
for _ in $(seq "$rounds"); do run --remote "$remote" --backends remote0,remote1,cpu | grep -E "backends:|prompt:|decode:|wire:"; done
