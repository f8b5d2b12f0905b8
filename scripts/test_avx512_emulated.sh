#!/usr/bin/env bash
# Runs the CPU backend's tests on an emulated AVX-512 CPU.
#
# Why: the AVX-512 kernels must not ship untested, and neither this project's
# machines nor CI have AVX-512 (AMD Zen 3); QEMU's TCG cannot execute it and
# Intel's SDE is not packaged. Bochs can: its Tiger Lake model has AVX-512
# F/BW/VL/DQ/CD/VNNI/VBMI. Bochs emulates a whole PC, so this script boots a
# stock Debian cloud kernel in it with an initramfs whose /init (busybox sh)
# runs our statically linked test binaries one after the other and powers
# off; the results come back on the emulated serial port.
#
# Usage:  scripts/test_avx512_emulated.sh [libtest args...]
#         (default: `--test-threads=1`; the args go to every binary)
# Env:    BOCHS       a Bochs binary built with --enable-evex (default: Debian's
#                     `bochs`, which has its debugger compiled in and runs at
#                     ~20 M instructions/s; a build with
#                     `--enable-all-optimizations --disable-debugger --with-nogui`
#                     runs at ~100-150 M/s)
#         CPU_MODEL   Bochs CPU model (default tigerlake)
#         ROOT        the checkout to test (default: the one holding this script)
#         WORK        scratch directory (default $ROOT/target/avx512-emulated)
#         TESTS       cargo test target selection (default: the lib and the
#                     `cpu` test binary of gantry-cpu)
#         TIMEOUT_S   wall-clock limit for the emulator (default 3600)
#         GUEST_ENV   VAR=value words for the tests' environment (default
#                     GANTRY_EXPECT_ISA=Avx512Vnni: the quant tests then fail
#                     unless the 512-bit VNNI path is the one chosen)
# Needs root (apt-get) on Debian 12, or the packages below already installed.
# Exits 0 only when every test binary exited 0 and the guest finished.
set -euo pipefail

root=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
work=${WORK:-$root/target/avx512-emulated}
model=${CPU_MODEL:-tigerlake}
timeout_s=${TIMEOUT_S:-3600}
tests=${TESTS:---lib --test cpu}
guest_env=${GUEST_ENV-GANTRY_EXPECT_ISA=Avx512Vnni}
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--test-threads=1)
mkdir -p "$work"
cd "$work"

# 1. Host packages: the emulator, its BIOS, an ISO boot loader, a static shell.
need=()
for p in bochs bochsbios vgabios isolinux syslinux-common xorriso cpio; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
bochs=${BOCHS:-/usr/bin/bochs}

# 2. Guest kernel (Debian 12's 6.12 cloud kernel: boots in about a minute in
#    Bochs; the 6.1 kernel stalls there) and busybox, as packages, unpacked here.
if [ ! -f guest/vmlinuz ]; then
    kpkg=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64$' | awk '{print $1}' | sort -V | tail -1)
    [ -n "$kpkg" ] || { echo "no linux-image-6.12 cloud kernel package found" >&2; exit 1; }
    rm -rf debs guest && mkdir -p debs guest
    (cd debs && apt-get download "$kpkg" busybox-static 2>&1 | grep -v '^W:' || true)
    dpkg -x debs/linux-image-*.deb debs/kernel
    dpkg -x debs/busybox-static_*.deb debs/busybox
    cp debs/kernel/boot/vmlinuz-* guest/vmlinuz
    cp debs/busybox/bin/busybox guest/busybox
fi

# 3. The test binaries, statically linked (the initramfs has no libc).
#    `--target` keeps RUSTFLAGS off build scripts and proc macros.
host=$(rustc -vV | sed -n 's/^host: //p')
# shellcheck disable=SC2086
(cd "$root" && RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR="$work/target" \
    cargo test -p gantry-cpu --release --target "$host" --no-run $tests --message-format=json) \
    > build.json
mapfile -t bins < <(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        print(m["executable"])
' build.json)
[ ${#bins[@]} -gt 0 ] || { echo "no test binaries were built" >&2; exit 1; }

# 4. Initramfs: busybox, the binaries, and an /init that runs them.
rm -rf initrd iso && mkdir -p initrd/bin initrd/tests initrd/proc initrd/tmp iso/isolinux
cp guest/busybox initrd/bin/busybox
for b in "${bins[@]}"; do cp "$b" "initrd/tests/$(basename "$b" | sed 's/-[0-9a-f]*$//')"; done
cat > initrd/init <<'EOF'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t tmpfs tmpfs /tmp
export TMPDIR=/tmp
echo "=== CPU $(/bin/busybox grep -o -w -E 'avx512[a-z_]*' /proc/cpuinfo | /bin/busybox sort -u | /bin/busybox tr '\n' ' ')"
for t in /tests/*; do
    echo "=== RUN $t $*"
    "$t" "$@"
    echo "=== EXIT $t $?"
done
echo "=== DONE"
# The emulated UART drains slower than the guest runs: let it finish.
/bin/busybox sleep 5
/bin/busybox poweroff -f
EOF
chmod +x initrd/init
(cd initrd && find . | cpio -o -H newc 2>/dev/null | gzip -1 > ../iso/initrd.img)
cp guest/vmlinuz iso/vmlinuz
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 iso/isolinux/
# Kernel arguments: Bochs reports no size or offset for the PKRU XSAVE
# component and the compacted XSAVE size wrongly, so protection keys, XSAVEC and
# XSAVES are hidden (clearcpuid: X86_FEATURE_PKU, OSPKE, XSAVEC, XSAVES); the
# kernel then enables AVX-512 state in the standard XSAVE format. VAR=value
# words the kernel does not know become /init's environment; everything after
# `--` goes to /init as arguments.
cat > iso/isolinux/isolinux.cfg <<EOF
DEFAULT run
PROMPT 0
TIMEOUT 0
LABEL run
  KERNEL /vmlinuz
  APPEND initrd=/initrd.img console=ttyS0,115200 quiet loglevel=3 nopku clearcpuid=515,516,321,323 lsm=capability $guest_env -- ${args[*]}
EOF
xorriso -as mkisofs -quiet -o boot.iso -b isolinux/isolinux.bin -c isolinux/boot.cat \
    -no-emul-boot -boot-load-size 4 -boot-info-table iso

# 5. Boot it. Debian's Bochs has its debugger compiled in (it waits for a
#    `continue` command), no `nogui` display and ALSA sound: deal with all three.
display="nogui"
extra=""
rc_args=()
help=$("$bochs" -help 2>&1 || true)
if grep -q -- '-rc filename' <<< "$help"; then
    printf 'c\n' > debugger.rc
    rc_args=(-rc debugger.rc)
    display='rfb, options="timeout=0"'
    # Its sound plugins open ALSA and crash on a machine without a card.
    extra='sound: waveoutdrv=dummy, waveindrv=dummy, midioutdrv=dummy'
fi
cat > bochsrc <<EOF
megs: 1024
cpu: model=$model, count=1, ips=200000000
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=cdrom, path=boot.iso, status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev=serial.log
display_library: $display
log: bochs.log
panic: action=fatal
error: action=report
clock: sync=none, time0=local
speaker: enabled=0
$extra
EOF
rm -f serial.log
echo "booting ${#bins[@]} test binaries in Bochs ($model) with: ${args[*]}"
start=$(date +%s)
timeout "$timeout_s" "$bochs" -q -f bochsrc "${rc_args[@]}" > bochs.out 2>&1 < /dev/null || true
echo "emulator ran $(( $(date +%s) - start )) s"

# 6. Results.
tr -d '\r' < serial.log | sed -n '/^=== CPU/,$p'
grep -q '^=== DONE' serial.log || { echo "the guest did not finish (see $work/serial.log, bochs.log)" >&2; exit 1; }
grep -q '^=== CPU .*avx512f' serial.log || { echo "the emulated CPU reported no AVX-512" >&2; exit 1; }
if tr -d '\r' < serial.log | grep '^=== EXIT' | grep -v -q ' 0$'; then
    echo "some test binary failed" >&2
    exit 1
fi
echo "all test binaries passed on the emulated AVX-512 CPU"
