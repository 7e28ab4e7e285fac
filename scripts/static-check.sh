#!/usr/bin/env bash
# Builds the static vloer-run the README documents and proves it: ldd finds no shared library,
# its size is reported next to tini-static's (and held to the README's figure), and it works as
# PID 1 in an otherwise empty root (itself, a static helper and an empty /proc), stopping a tree
# that ignores SIGTERM.
#
#   scripts/static-check.sh                   build (musl, scripts/static-build.sh), then check
#   scripts/static-check.sh --glibc           the same for the glibc static build
#   scripts/static-check.sh [--glibc] BINARY  check an existing binary of that kind
#
# Another machine's binary (aarch64 on x86_64: scripts/cross-check.sh) gets the same checks, read
# from its ELF headers where ldd cannot tell, and runs as PID 1 under qemu-user (copied into the
# root); the README's size table is x86_64's, so only an x86_64 binary is held to it.
#
# The PID 1 part needs root or unprivileged user namespaces; without either it is skipped with
# the reason (exit 0). Any failed check exits 1. .ci/run runs this script.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/arch.sh

fail() { echo "static-check: FAIL: $*" >&2; exit 1; }
say() { echo "static-check: $*"; }

kind=musl
build_flag=()
if [ "${1:-}" = --glibc ]; then
    kind=glibc
    build_flag=(--glibc)
    shift
fi
if [ $# -ge 1 ]; then
    bin=$1
else
    bin=$(scripts/static-build.sh "${build_flag[@]}")
fi
[ -x "$bin" ] || fail "$bin is not an executable"
arch=$(elf_arch "$bin") || fail "$bin is not a binary vloer-run is released for"
emulator=()
if [ "$arch" != "$(host_arch)" ]; then
    qemu=$(emulator_for "$arch") || fail "no qemu-user to run this $arch binary with"
    emulator=(/qemu)
fi

# 1. No shared libraries.
if [ ${#emulator[@]} = 0 ]; then
    ldd_out=$(ldd "$bin" 2>&1 || true)
    say "ldd $bin: $(echo "$ldd_out" | tr -s ' \t\n' ' ')"
    case "$ldd_out" in
        *"=>"*) fail "ldd lists shared libraries" ;;
        *"not a dynamic executable"* | *"statically linked"*) ;;
        *) fail "ldd does not say the binary is static" ;;
    esac
fi
elf_is_static "$bin" || fail "the ELF headers name a loader or a shared library"
say "ELF: $arch, no program interpreter, no shared library"
if command -v file >/dev/null 2>&1; then
    say "file: $(file -b "$bin")"
fi

# 2. Size, next to tini-static (708,080 bytes in Debian's tini 0.19.0 when it is not installed).
size=$(stat -c %s "$bin")
tini_size=708080
tini_from="Debian tini 0.19.0"
if [ -f /usr/bin/tini-static ]; then
    tini_size=$(stat -c %s /usr/bin/tini-static)
    tini_from=/usr/bin/tini-static
fi
say "size: vloer-run $size bytes ($((size / 1024)) KiB); tini-static $tini_size bytes ($tini_from); ratio $(awk -v a="$size" -v b="$tini_size" 'BEGIN { printf "%.2f", a / b }')"
# The goal is at most twice tini-static, for the binary users deploy (musl); the glibc
# build's static start-up alone is about 550 KiB, so it only gets a warning.
if [ "$size" -gt $((2 * tini_size)) ]; then
    [ "$kind" = musl ] && fail "the static musl binary is more than twice tini-static's size"
    say "WARNING: more than twice tini-static's size (the goal, for the musl build, is at most 2x)"
fi
# The README's size table must be a figure of this build (within 5%: compilers drift), not a stale one.
readme_size=$(sed -n "s/^| vloer-run [^|]*static $kind ($arch,[^|]*| \\([0-9,]*\\) |.*/\\1/p" README.md | tr -d , | head -n 1)
if [ -n "$readme_size" ]; then
    drift=$(awk -v a="$size" -v b="$readme_size" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; printf "%d", d * 100 }')
    if [ "$drift" -gt 5 ]; then
        fail "README.md says the static $kind binary is $readme_size bytes; this build is $size ($drift% off): update the size table from this run"
    fi
    say "README's size figure for static $kind: $readme_size bytes, within $drift% of this build"
elif [ "$arch" = x86_64 ]; then
    fail "README.md has no size row for the static $kind binary"
else
    say "README.md's size table is x86_64's: no figure to compare this $arch build with"
fi

# 3. PID 1 in an otherwise empty root.
unshare_user=()
if [ "$(id -u)" != 0 ]; then
    if ! unshare --user --map-root-user true 2>/dev/null; then
        say "SKIPPED the PID 1 check: not root and no unprivileged user namespaces here"
        exit 0
    fi
    unshare_user=(--user --map-root-user)
fi
for tool in rustc jq unshare timeout; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool is needed for the PID 1 check"
done
root=$(mktemp -d "${TMPDIR:-/tmp}/vloer-static-root.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir "$root/proc"
cp "$bin" "$root/vloer-run"
# qemu-user runs vloer-run; the helper, built for this machine, it hands to the kernel.
[ ${#emulator[@]} = 0 ] || cp "$qemu" "$root/qemu"
rustc -O -C target-feature=+crt-static -C panic=abort -C strip=symbols --edition 2021 \
    scripts/static-helper.rs -o "$root/helper"
ldd "$root/helper" 2>&1 | grep -Eq 'not a dynamic executable|statically linked' \
    || fail "the helper is not static"
say "empty root: $(cd "$root" && echo *)"

in_root() {
    timeout 60 unshare "${unshare_user[@]}" --pid --fork --mount --mount-proc --root "$root" "$@"
}

version=$(in_root "${emulator[@]}" /vloer-run --version) || fail "--version in the empty root"
say "in the empty root: $version"

set +e
out=$(in_root "${emulator[@]}" /vloer-run --grace 300ms --kill-timeout 2s --verdict - -- /helper 2>"$root/stderr")
status=$?
set -e
say "PID 1 run: exit $status; stdout:"
echo "$out" | sed 's/^/    /'
if [ -s "$root/stderr" ]; then
    say "stderr:"
    sed 's/^/    /' "$root/stderr"
fi
[ "$status" = 7 ] || fail "vloer-run as PID 1 exited $status, not the helper's 7"
echo "$out" | grep -qx 'ppid=1' || fail "the helper's parent was not PID 1"
verdict=$(echo "$out" | tail -n 1)
# Both stubborn children ignored SIGTERM, so each needed a SIGKILL; as orphans, PID 1 reaped them.
echo "$verdict" | jq -e '.stopped == true and .survivors == [] and .exit_code == 7
    and .child.exit_code == 7 and .sent.SIGKILL == 2 and .reaped >= 2' >/dev/null \
    || fail "the verdict does not show a confirmed stop of the whole tree"
say "OK: static $arch, $size bytes, PID 1 in an empty root${emulator:+ (under qemu-user)} stopped and confirmed a SIGTERM-proof tree"
