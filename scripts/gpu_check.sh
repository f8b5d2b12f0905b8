#!/usr/bin/env bash
# The GPU check, offline, from the prebuilt bundle (`scripts/gpu_bundle.sh`
# builds .gpu-bundle/ on a machine with Rust; the lent GPU machine has no
# toolchain and no network). On a lent machine, one `device` tool call:
#
#   run(command="bash scripts/gpu_check.sh", carry=[".gpu-bundle"], timeout_s=480)
#
# It runs, each step under a timeout, going on after a failure, within
# BUDGET_S seconds in all (default 420):
#   devices            `gantry devices` (and the GPU, the driver, the libraries found)
#   cuda_tests         gantry-cuda's tests: kernels through every NVRTC found,
#                      the driverless contract, the conformance suite on cuda0
#                      against the CPU (CUDA graphs on)
#   session_cuda       the facade's session / scheduler test on cuda0 + CPU
#   session_wgpu       the same on wgpu0 + CPU
#   families_cuda      every decoder family's seeded files on cuda0 + CPU
#                      against llama.cpp's stored logits
#   workload_*         the default workload (`gantry` with no subcommand: a
#                      seeded random llama, checked against a CPU-only run)
#                      on cuda0,cpu; cuda0,cpu without CUDA graphs; wgpu0,cpu;
#                      wgpu0,cpu in f16: prompt and decode tokens/s
#   perf_cuda          `gantry test-ops --backend cuda0 --mode perf` (MUL_MAT, FLASH_ATTN_EXT)
#   conformance_cuda_no_graphs  the CUDA conformance suite with GANTRY_CUDA_GRAPHS=0
#   perf_wgpu          the same perf cases on wgpu0 (decode-shaped ones only
#                      on a software adapter)
#   conformance_wgpu   `gantry test-ops --backend wgpu0` (every op against the CPU)
#   scheduler          the facade's scheduler tests (test GPUs; fuzz replays)
#   smollm2_offline    the SmolLM2 tests without the model file: each must skip, saying why
# A CUDA step on a machine without the NVIDIA driver ends "skipped: no CUDA
# driver" (it still runs, so a binary that cannot start is a failure).
#
# Under $OUT (default ./gpu-check; the device tool returns at most 8 files):
# summary.txt (also printed at the end), env.log, cuda.log, session.log,
# workload.log, perf.log, wgpu.log. STEPS="cuda_tests perf_cuda" runs some
# steps only (a rerun in the minutes left). Exits non-zero when a step failed.
#
# The test binaries find tests/data and fuzz/ through GANTRY_REPO_ROOT (set
# here to this checkout); the model cache is an empty folder, so no test
# finds SmolLM2 (92 MB, too big to travel) and none can fetch it.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/.gpu-bundle/bin
OUT="${OUT:-$ROOT/gpu-check}"
BUDGET_S="${BUDGET_S:-420}"
STEPS="${STEPS:-}"
mkdir -p "$OUT"
for f in summary.txt env.log cuda.log session.log workload.log perf.log wgpu.log; do : >"$OUT/$f"; done
SUMMARY=$OUT/summary.txt
SCRATCH=$(mktemp -d /tmp/gantry-gpu-check.XXXXXX)
DEADLINE=$((SECONDS + BUDGET_S))
failed=0

say() { echo "$*" | tee -a "$SUMMARY"; }

if [[ ! -f $BIN/gantry ]]; then
    say "no bundle in $ROOT/.gpu-bundle: run scripts/gpu_bundle.sh where cargo is, and carry .gpu-bundle"
    exit 2
fi
# In case the copy that carried them dropped the mode bits.
chmod +x "$BIN"/* 2>/dev/null || true

# --- the environment -----------------------------------------------------
export GANTRY_REPO_ROOT=$ROOT
export GANTRY_MODEL_CACHE=$SCRATCH/models
export GANTRY_CUDA_CACHE=$SCRATCH/cuda-kernels
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$SCRATCH/xdg}"
mkdir -p "$GANTRY_MODEL_CACHE" "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
# No network: pip's fetch of a model fails at once instead of retrying.
export PIP_RETRIES=0 PIP_TIMEOUT=3 PIP_DISABLE_PIP_VERSION_CHECK=1
export RUST_BACKTRACE=1

{
    echo "date: $(date -u +%FT%TZ); host: $(uname -srm); cores: $(nproc)"
    echo "checkout: $ROOT ($(git rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
    head -n 3 "$ROOT/.gpu-bundle/MANIFEST.txt" 2>/dev/null | sed 's/^/bundle: /'
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | sed 's/^/nvidia-smi: /'
    else
        echo "nvidia-smi: not installed"
    fi
} | tee -a "$SUMMARY" >>"$OUT/env.log"

# wgpu needs the Vulkan loader: the bundle's packages where the system has none.
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1'; then
    if [[ $(id -u) == 0 ]] && command -v dpkg >/dev/null; then
        for f in "$ROOT"/.gpu-bundle/gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
        say "vulkan: the loader unpacked from .gpu-bundle/gl"
    else
        say "vulkan: no libvulkan.so.1 and not root (or no dpkg): wgpu will find no adapter"
    fi
fi
# The NVIDIA Vulkan and EGL drivers where the loaders do not look (the device README).
nv=/usr/local/nvidia/share
if [[ -f $nv/vulkan/icd.d/nvidia_icd.json ]] \
    && ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES=$nv/vulkan/icd.d/nvidia_icd.json
    export __EGL_VENDOR_LIBRARY_FILENAMES=$nv/glvnd/egl_vendor.d/10_nvidia.json
    say "vulkan: VK_DRIVER_FILES=$VK_DRIVER_FILES"
fi
{
    echo "== libraries the loader knows"
    ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvrtc|libcublas|libvulkan' || echo "(none)"
    echo "== CUDA wheels in python3's site-packages"
    python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null | while read -r d; do
        ls -d "$d"/nvidia/*/lib/lib{nvrtc,cublas}.so* 2>/dev/null
    done
    echo "== vulkan ICDs"
    ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null
    echo "== bundle"
    cat "$ROOT/.gpu-bundle/MANIFEST.txt" 2>/dev/null
} >>"$OUT/env.log" 2>&1

# --- steps ---------------------------------------------------------------
CUDA=unknown # yes | nodriver | broken: set after `gantry devices`
WGPU=unknown # yes | software | none

wanted() { [[ -z $STEPS || " $STEPS " == *" $1 "* ]]; }

# step NAME LOG KIND LIMIT CMD...: runs CMD (KIND cuda, wgpu or any) under
# `timeout LIMIT` (cut to the time left), its output appended to $OUT/LOG
# and kept in $SCRATCH/NAME.out; one line in the summary.
step() {
    local name=$1 log=$2 kind=$3 limit=$4
    shift 4
    wanted "$name" || return 0
    local left=$((DEADLINE - SECONDS))
    if ((left < 20)); then
        say "$(printf '%-28s %s' "$name" "skipped: out of time (BUDGET_S=$BUDGET_S)")"
        return 0
    fi
    ((limit > left - 10)) && limit=$((left - 10))
    if [[ $kind == wgpu && $WGPU == none ]]; then
        say "$(printf '%-28s %s' "$name" "skipped: no wgpu adapter")"
        return 0
    fi
    local t0=$SECONDS rc result
    {
        echo
        echo "===== $name ($(date -u +%T), limit ${limit} s): $*"
    } >>"$OUT/$log"
    timeout -k 5 "$limit" "$@" >"$SCRATCH/$name.out" 2>&1
    rc=$?
    cat "$SCRATCH/$name.out" >>"$OUT/$log"
    if ((rc == 126 || rc == 127)); then
        result="FAILED to start (exit $rc)"
        failed=1
    elif ((rc == 124 || rc == 137)); then
        result="TIMEOUT (${limit} s)"
        failed=1
    elif [[ $kind == cuda && $CUDA == nodriver ]]; then
        result="skipped: no CUDA driver (ran, exit $rc)"
    elif ((rc == 0)); then
        result="ok"
    else
        result="FAILED (exit $rc)"
        failed=1
    fi
    echo "----- $name: $result, $((SECONDS - t0)) s" >>"$OUT/$log"
    say "$(printf '%-28s %-44s %4d s' "$name" "$result" $((SECONDS - t0)))"
    if [[ $result == FAILED* || $result == TIMEOUT* ]]; then
        # The conformance steps' failed cases come in their tally.
        grep -E 'panicked|error|Error' "$SCRATCH/$name.out" | grep -v ': FAIL' | head -n 6 | sed 's/^/    | /' | tee -a "$SUMMARY"
    fi
}

# tally NAME: the conformance lines of step NAME's output, per op: passed,
# failed, not supported; then the failures' first lines.
tally() {
    [[ -f $SCRATCH/$1.out ]] || return 0
    awk '
        /^  [A-Z][A-Z0-9_]*[(:]/ {
            op = $1; sub(/[(:].*/, "", op)
            if (!(op in seen)) { seen[op] = 1; order[++n] = op }
            if ($0 ~ /\): OK|^  [A-Z0-9_]+: OK/) ok[op]++
            else if ($0 ~ /: FAIL/) { bad[op]++; if (nf < 10) fails[++nf] = $0 }
            else if ($0 ~ /: not supported/) uns[op]++
        }
        /^[0-9]+ passed, [0-9]+ failed/ { total = $0 }
        END {
            line = ""
            for (i = 1; i <= n; i++) {
                o = order[i]
                line = line sprintf("%s %d/%d%s  ", o, ok[o] + 0, ok[o] + bad[o], uns[o] ? sprintf(" (%d n/s)", uns[o]) : "")
            }
            if (n) print "    ops (passed/run): " line
            if (total != "") print "    " total
            for (i = 1; i <= nf; i++) print "    | " fails[i]
        }' "$SCRATCH/$1.out" | tee -a "$SUMMARY"
}

# workload NAME KIND LIMIT ENV... -- ARGS...: the default workload, and its two result lines.
workload() {
    local name=$1 kind=$2 limit=$3
    shift 3
    local envs=()
    while [[ $1 != -- ]]; do
        envs+=("$1")
        shift
    done
    shift
    step "$name" workload.log "$kind" "$limit" env "${envs[@]}" "$BIN/gantry" "$@"
    [[ -f $SCRATCH/$name.out ]] && grep -E '^(backends|prompt|check against)' "$SCRATCH/$name.out" | sed 's/^/    /' | tee -a "$SUMMARY"
}

# perf NAME KIND LIMIT ARGS...: `gantry test-ops --mode perf`, and its fastest cases per op.
perf() {
    local name=$1 kind=$2 limit=$3
    shift 3
    step "$name" perf.log "$kind" "$limit" "$BIN/gantry" test-ops --mode perf --op MUL_MAT,FLASH_ATTN_EXT "$@"
    [[ -f $SCRATCH/$name.out ]] || return 0
    awk '/ GFLOP\/s/ {
            op = $1; sub(/\(.*/, "", op); g = $(NF - 1) + 0; n[op]++
            c = $0; sub(/^ +/, "", c); sub(/: OK.*/, "", c)
            if (g > best[op]) { best[op] = g; line[op] = c }
        }
        END { for (op in n) printf "    %s: %d cases, best %.1f GFLOP/s (%s)\n", op, n[op], best[op], line[op] }' \
        "$SCRATCH/$name.out" | tee -a "$SUMMARY"
    tally "$name"
}

say ""
say "step                         result                                       time"
step devices env.log any 60 "$BIN/gantry" devices
if [[ -f $SCRATCH/devices.out ]]; then
    grep -E '^platform|^  [a-zA-Z0-9]+ \(|no device found' "$SCRATCH/devices.out" | sed 's/^/    /' | tee -a "$SUMMARY"
    if grep -qE '^  cuda0 \(' "$SCRATCH/devices.out"; then
        CUDA=yes
    elif grep -q 'libcuda.so not found' "$SCRATCH/devices.out"; then
        CUDA=nodriver
    else
        CUDA=broken
    fi
    if grep -qE '^  wgpu0 \(.*software' "$SCRATCH/devices.out"; then
        WGPU=software
    elif grep -qE '^  wgpu0 \(' "$SCRATCH/devices.out"; then
        WGPU=yes
    else
        WGPU=none
    fi
fi
# Without `gantry devices` (STEPS without it): ask the loader.
if [[ $CUDA == unknown ]]; then
    if ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1'; then CUDA=yes; else CUDA=nodriver; fi
fi
[[ $WGPU == unknown ]] && WGPU=yes
say "    CUDA: $CUDA; wgpu: $WGPU"

step cuda_tests cuda.log cuda 180 "$BIN/cuda-tests" --nocapture
tally cuda_tests
step session_cuda session.log cuda 90 "$BIN/models-tests" session_gpu::session_on_cuda --nocapture
step session_wgpu session.log wgpu 90 "$BIN/models-tests" session_gpu::session_on_wgpu --nocapture
# Every decoder family (Llama 3 rope factors, Qwen biases and Q/K norms,
# Gemma 2 soft-caps and windows, Phi 3's fused products) against llama.cpp.
step families_cuda session.log cuda 120 "$BIN/models-tests" family_reference::every_family_matches_llama_cpp_on_cuda --nocapture

WORKLOAD=(--prompt 128 -n 64)
workload workload_cuda0_cpu cuda 90 GANTRY_CUDA_GRAPHS=1 -- --backends cuda0,cpu "${WORKLOAD[@]}"
workload workload_cuda0_cpu_no_graphs cuda 90 GANTRY_CUDA_GRAPHS=0 -- --backends cuda0,cpu "${WORKLOAD[@]}"
workload workload_wgpu0_cpu wgpu 120 GANTRY_CUDA_GRAPHS=1 -- --backends wgpu0,cpu "${WORKLOAD[@]}"
workload workload_wgpu0_cpu_f16 wgpu 120 GANTRY_CUDA_GRAPHS=1 -- --backends wgpu0,cpu --dtype f16 "${WORKLOAD[@]}"

perf perf_cuda cuda 120 --backend cuda0
step conformance_cuda_no_graphs cuda.log cuda 150 env GANTRY_CUDA_GRAPHS=0 "$BIN/cuda-tests" conformance --nocapture
tally conformance_cuda_no_graphs
if [[ $WGPU == software ]]; then
    # A software adapter times the large cases for minutes: the decode-shaped ones only.
    perf perf_wgpu wgpu 90 --backend wgpu0 --name 'n=1,'
else
    perf perf_wgpu wgpu 120 --backend wgpu0
fi
step conformance_wgpu wgpu.log wgpu 150 "$BIN/gantry" test-ops --backend wgpu0
tally conformance_wgpu
step scheduler session.log any 60 "$BIN/scheduler-tests"
step smollm2_offline session.log any 60 "$BIN/models-tests" smollm2 --nocapture
if [[ -f $SCRATCH/smollm2_offline.out ]]; then
    skipped=$(grep -c '^SKIPPED: SmolLM2 could not be fetched' "$SCRATCH/smollm2_offline.out")
    say "    SmolLM2 tests skipped with a message: $skipped"
fi

say ""
say "total $SECONDS s; logs in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
rm -rf "$SCRATCH"
exit "$failed"
