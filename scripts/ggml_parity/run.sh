#!/usr/bin/env bash
# Checks Gantry's CPU backend against ggml's own: every test case of the
# conformance suite whose op ggml has runs through ggml's CPU backend and
# through Gantry's, on the same inputs, and the example prints per op the
# cases compared, the worst normalized mean squared error and ggml's own
# tolerance for that op (tests/test-backend-ops.cpp's max_nmse_err). It
# exits non-zero if a case is over that tolerance or failed to run.
#
#   scripts/ggml_parity/run.sh /path/to/ggml [filter] [ggml threads]
#
# The filter is a comma-separated list of op names (empty: every op).
# /path/to/ggml is a ggml source tree: a clone of
# https://github.com/ggml-org/ggml, or the ggml/ folder of a llama.cpp
# tree. Get it yourself, outside this repository: this script never
# downloads anything, and nothing it builds lands in this repository (ggml
# and the driver build into <ggml>/build-parity, the case files go to a
# temporary folder).
set -euo pipefail
ggml=$(cd "${1:?usage: run.sh /path/to/ggml [ops] [threads]}" && pwd)
ops=${2:-}
threads=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build="$ggml/build-parity"
jobs=${JOBS:-2}

# ggml is built as a subproject of a two-line wrapper: standalone, ggml's
# CMakeLists wants files (ggml.pc.in) that the copies vendored by llama.cpp
# leave out.
mkdir -p "$build/wrapper"
cat > "$build/wrapper/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.14)
project(ggml_parity C CXX)
add_subdirectory("$ggml" ggml)
CMAKE
# Native, as ggml's users build it. AMX off: some VMs report AMX but fault
# on its tile instructions (see scripts/build_llamacpp_native.sh), and the
# AMX path only takes quantized weights in its own buffer type, which this
# driver never uses.
cmake -S "$build/wrapper" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON -DGGML_OPENMP=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target ggml-cpu ggml >/dev/null
lib="$build/ggml/src"
cc -O2 -std=gnu11 -I"$ggml/include" "$here/driver.c" -o "$build/parity_driver" \
    "$lib/libggml.a" "$lib/libggml-cpu.a" "$lib/libggml-base.a" -lstdc++ -lm -lpthread
echo "ggml $(git -C "$ggml" rev-parse --short=8 HEAD 2>/dev/null || echo "(not a git checkout)") at $ggml"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$repo"
cargo run --release -q -p gantry-conformance --example ggml_parity -- "$build/parity_driver" "$work" "$ops" "$threads"
