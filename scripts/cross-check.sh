#!/usr/bin/env bash
# The arm64 (aarch64) build, checked on an x86_64 machine without arm64 hardware:
#   1. every target of the crate (binary, unit and integration tests, benches) type-checks for
#      aarch64, so a syscall number, libc constant or struct layout written for x86_64 fails here;
#   2. the unit tests run under qemu-user;
#   3. the static release binary is cross-built (scripts/static-build.sh --target) and checked as
#      the x86_64 one is (scripts/static-check.sh: static, ELF machine, the same size bound, PID 1
#      in an empty root stopping a SIGTERM-proof tree), with its --version, --help and a bad
#      option's message and exit status 125;
#   4. examples/Dockerfile's build stage, run with uname -m saying x86_64, then aarch64, builds a
#      binary for that machine (the cross linker stands in for an arm64 build stage's own cc);
#   5. the binary is packed (scripts/release.sh) and its tarball checked (scripts/release-check.sh).
# Not run: the integration tests, and any run where vloer-run is not PID 1, since qemu-user
# refuses prctl(PR_SET_CHILD_SUBREAPER) (EINVAL). What does run here runs on this machine's
# kernel, through qemu's translation of the aarch64 system calls, not on an arm64 kernel.
#
#   scripts/cross-check.sh [OUTDIR]   (where the aarch64 tarball goes; default: a temporary one)
#
# Needs the aarch64-unknown-linux-musl target (added with rustup when missing), a cross linker
# (Debian: gcc-aarch64-linux-gnu) and qemu-user (Debian: qemu-user-static); without them it says
# so and exits 0, but with VLOER_TESTS_NO_SKIP=1 (CI) that fails. A failed check exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/arch.sh

fail() { echo "cross-check: FAIL: $*" >&2; exit 1; }
say() { echo "cross-check: $*"; }
skip() {
    [ "${VLOER_TESTS_NO_SKIP:-}" = 1 ] && fail "$* (with VLOER_TESTS_NO_SKIP=1 a skip fails)"
    say "SKIPPED: $*"
    exit 0
}

target=aarch64-unknown-linux-musl
if [ "$(host_arch)" = aarch64 ]; then
    say "this machine is aarch64: scripts/static-check.sh checks its own build natively"
    exit 0
fi
if ! rustup target list --installed 2>/dev/null | grep -qx "$target" \
    && ! rustup target add "$target"; then
    skip "the $target target could not be installed (rustup target add $target)"
fi
use_cross_linker "$target" || skip "no cross linker for $target"
qemu=$(emulator_for aarch64) || skip "no qemu-user to run aarch64 binaries"
runner=CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_RUNNER
export "$runner=${!runner:-$qemu}"
started=$SECONDS

# 1, 2.
cargo check --target "$target" --all-targets
say "every target type-checks for $target"
# One test thread: qemu-user can deadlock a child forked while another guest thread runs (a
# test that forks 1000 processes hung so, its child stuck on a futex inside qemu). A run that
# still hangs is ended and tried once more, said out loud; a second hang fails.
unit() { timeout --kill-after=10 900 cargo test --target "$target" --bin vloer-run -- --test-threads=1; }
status=0
unit || status=$?
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  say "WARNING: the unit tests hung under qemu-user (a qemu fork deadlock); trying once more"
  status=0
  unit || status=$?
fi
[ "$status" -eq 0 ] || fail "the unit tests failed under qemu-user (exit $status)"
say "the unit tests pass under $("$qemu" --version | head -n 1)"

# 3.
bin=$(scripts/static-build.sh --target "$target")
[ "$(elf_arch "$bin")" = aarch64 ] || fail "$bin is not an aarch64 binary"
say "readelf -h: $(readelf -h "$bin" | sed -n 's/^ *Machine: *//p')"
scripts/static-check.sh "$bin"
version=$("$qemu" "$bin" --version)
[[ "$version" == "vloer-run "[0-9]* ]] || fail "--version printed: $version"
"$qemu" "$bin" --help | grep -q '^Usage: vloer-run ' || fail "--help shows no usage line"
set +e
err=$("$qemu" "$bin" --no-such-option 2>&1 >/dev/null)
status=$?
set -e
[ "$status" = 125 ] || fail "a bad option exited $status, not 125: $err"
[[ "$err" == "vloer-run: "*"'--no-such-option'"* ]] || fail "a bad option's message: $err"
say "under qemu-user: --version ($version), --help, a bad option (exit 125: $err)"
# What qemu-user cannot run, shown and not judged: a later qemu may allow it.
set +e
err=$("$qemu" "$bin" -- true 2>&1)
status=$?
set -e
say "not run: a run where vloer-run is not PID 1 (under qemu-user: exit $status, $err)"

# 4.
for arch in x86_64 aarch64; do
    fake=$(mktemp -d "${TMPDIR:-/tmp}/vloer-cross.XXXXXX")
    printf '#!/bin/sh\n[ "$1" = -m ] && [ $# = 1 ] && exec echo %s\nexec /bin/uname "$@"\n' \
        "$arch" > "$fake/uname"
    chmod +x "$fake/uname"
    run=$(sed -n '/^RUN /,/[^\\]$/p' examples/Dockerfile | sed 's/^RUN //')
    PATH=$fake:$PATH sh -c "${run// \/vloer-run/ $fake/vloer-run}" >&2 \
        || fail "examples/Dockerfile's RUN line failed where uname -m says $arch"
    built=$(elf_arch "$fake/vloer-run") \
        || fail "examples/Dockerfile's RUN line left no binary where uname -m says $arch"
    [ "$built" = "$arch" ] \
        || fail "examples/Dockerfile's build stage built $built where uname -m says $arch"
    rm -rf "$fake"
    say "examples/Dockerfile's build stage where uname -m says $arch: an $built binary"
done

# 5.
out=${1:-}
if [ -z "$out" ]; then
    out=$(mktemp -d "${TMPDIR:-/tmp}/vloer-cross-dist.XXXXXX")
    trap 'rm -rf "$out"' EXIT
fi
scripts/release.sh --bin "$bin" "$out"
scripts/release-check.sh "$out"/vloer-run-*-"$target".tar.gz
say "OK: $target built and checked in $((SECONDS - started)) s"
