#!/usr/bin/env bash
# Builds ggml (CPU only, Release) in a ggml checkout given as the first
# argument, builds driver.c against it, and runs it: ggml's scheduler placing
# the 934-node SmolLM2 prompt graph from scratch, best and median of several
# rounds. Compare with, in the same sitting (interleave the runs: the
# development machine is shared and its speed drifts):
#   target/release/examples/sched_from_scratch [rounds] [iterations]
#   cargo bench -p gantry --bench sched -- reset_split_alloc/gpu_cpu
#
#   scripts/sched_vs_ggml/run.sh /path/to/ggml [rounds] [iterations per round]
#
# Get ggml yourself (git clone https://github.com/ggml-org/ggml, outside this
# repository); this script never downloads it, and nothing it builds lands in
# this repository (the build goes to <ggml>/build-sched-driver).
set -euo pipefail
ggml=${1:?usage: run.sh /path/to/ggml [rounds] [iterations]}
rounds=${2:-7}
iters=${3:-1000}
here=$(cd "$(dirname "$0")" && pwd)
build="$ggml/build-sched-driver"
# Not -march=native: Gantry is built for plain x86-64 too, and valgrind
# (callgrind counts the instructions, see examples/sched_from_scratch.rs)
# cannot run AVX-512 code.
cmake -S "$ggml" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
    -DGGML_OPENMP=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null 2>&1
cc -O2 -std=gnu11 -I"$ggml/include" -I"$ggml/src" "$here/driver.c" -o "$build/sched_driver" \
    "$build/src/libggml.a" "$build/src/libggml-cpu.a" "$build/src/libggml-base.a" -lstdc++ -lm -lpthread
echo "ggml $(git -C "$ggml" rev-parse --short=8 HEAD 2>/dev/null || echo "(not a git checkout)")"
"$build/sched_driver" "$rounds" "$iters"
