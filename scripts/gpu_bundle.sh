#!/usr/bin/env bash
# Builds here what `scripts/gpu_check.sh` runs on a lent GPU machine, which has
# no Rust toolchain and no network: stripped release binaries (cargo profile
# `bundle`: release without debug info, stripped; target/bundle/) and the
# Vulkan loader packages, in the ignored folder .gpu-bundle/ (carried with
# the `device` tool's `carry`). Prints the bundle's size and the working
# tree's (tracked and untracked-not-ignored files), which travel together
# and must stay under 64 MiB; fails when they do not.
#
#   .gpu-bundle/bin/gantry            the CLI with CUDA and wgpu (no remote)
#   .gpu-bundle/bin/cuda-tests        gantry-cuda's tests/cuda (conformance,
#                                     driverless, kernels_compile)
#   .gpu-bundle/bin/models-tests      the facade's tests/models (session_gpu, smollm2_reference, ...)
#   .gpu-bundle/bin/scheduler-tests   the facade's tests/scheduler (sched_scenarios, fuzz replays)
#   .gpu-bundle/gl/*.deb              libvulkan1 and the GL loaders (the device README's list)
#   .gpu-bundle/MANIFEST.txt          commit, date, files and sizes
#
# The test binaries read tests/data and fuzz/ through GANTRY_REPO_ROOT (the
# path of the checkout they were built in is compiled in, and differs there).
# Needs: cargo, python3 (to read cargo's JSON), apt-get (the .debs).
# JOBS sets cargo's -j (default: every core).
set -euo pipefail
cd "$(dirname "$0")/.."

BUNDLE=.gpu-bundle
LIMIT=$((64 * 1024 * 1024))
JOBS="${JOBS:-$(nproc)}"
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/gl"

# executables NAME...: the executables of the targets NAME in cargo's JSON
# messages on stdin, one "name path" a line.
executables() {
    python3 -c '
import json, sys
wanted = set(sys.argv[1:])
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in wanted:
        print(m["target"]["name"], m["executable"])
' "$@"
}

# build OUT_NAME TARGET_NAME CARGO_ARGS...: runs cargo with JSON messages
# (diagnostics still rendered on stderr) and copies TARGET_NAME's executable
# to $BUNDLE/bin/OUT_NAME.
build() {
    local out=$1 target=$2
    shift 2
    echo "== cargo $*"
    local json
    json=$(cargo "$@" -j"$JOBS" --profile bundle --message-format=json-render-diagnostics)
    local path
    path=$(executables "$target" <<<"$json" | awk 'NR == 1 { print $2 }')
    if [[ -z "$path" || ! -x "$path" ]]; then
        echo "gpu_bundle: cargo named no executable for $target" >&2
        exit 1
    fi
    cp "$path" "$BUNDLE/bin/$out"
    # The profile strips already; `strip` is a no-op then, and catches a
    # profile edited away from it.
    if command -v strip >/dev/null; then strip "$BUNDLE/bin/$out"; fi
    echo "   $out <- $path"
}

build gantry gantry build -p gantry-cli --no-default-features --features cuda,wgpu
build cuda-tests cuda test --no-run -p gantry-cuda --test cuda
build models-tests models test --no-run -p gantry --features cuda,wgpu --test models
build scheduler-tests scheduler test --no-run -p gantry --features cuda,wgpu --test scheduler

# The Vulkan loader (and the GL ones beside it), as the device README brings
# them: amd64 packages of this machine's Debian, unpacked there only when
# `ldconfig -p` finds no libvulkan.
echo "== apt-get download (Vulkan and GL loaders)"
lists=$(mktemp -d /tmp/gantry-apt-lists.XXXXXX)
mkdir -p "$lists/partial"
apt_opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
apt-get "${apt_opts[@]}" update -qq
(cd "$BUNDLE/gl" && apt-get "${apt_opts[@]}" download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
rm -rf "$lists"

{
    echo "gantry GPU bundle (scripts/gpu_bundle.sh; run by scripts/gpu_check.sh)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "built: $(date -u +%FT%TZ) on $(uname -m), $(ldd --version 2>/dev/null | head -n 1)"
    echo "rustc: $(rustc --version)"
    (cd "$BUNDLE" && find bin gl -type f -printf '%s\t%p\n' | sort -k2)
} >"$BUNDLE/MANIFEST.txt"

bundle_bytes=$(find "$BUNDLE" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [[ -f "$f" && ! -L "$f" ]] && printf '%s\0' "$f"
done | xargs -0 -r stat -c '%s' | awk '{ s += $1 } END { print s + 0 }')
total=$((bundle_bytes + tree_bytes))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo
cat "$BUNDLE/MANIFEST.txt"
echo
echo "bundle ($BUNDLE):  $(mib "$bundle_bytes")"
echo "working tree:        $(mib "$tree_bytes") (tracked + untracked-not-ignored)"
echo "together:            $(mib "$total") of the 64 MiB that travel ($(mib $((LIMIT - total))) to spare)"
if ((total >= LIMIT)); then
    echo "gpu_bundle: over the 64 MiB the device tool carries" >&2
    exit 1
fi
