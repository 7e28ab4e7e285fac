#!/usr/bin/env bash
# Checks a release tarball as a user would use it: it unpacks into an empty root, its SHA256SUMS
# match, its vloer-run is a static binary for the machine its name says, and it runs there as
# PID 1 (no shared library, no /bin, nothing else), stops its child and confirms it.
#
#   scripts/release-check.sh dist/vloer-run-VERSION-TARGET.tar.gz...   (each in turn)
#
# Another machine's binary (aarch64 on x86_64) runs under qemu-user, copied into the root: as
# PID 1 it needs no PR_SET_CHILD_SUBREAPER, which qemu-user refuses. The run needs root or
# unprivileged user namespaces, and qemu-user for another machine's binary (else it says so and
# exits 0); a failure exits 1.
set -euo pipefail
. "$(dirname "$0")/arch.sh"
fail() { echo "release-check: FAIL: $*" >&2; exit 1; }
say() { echo "release-check: $*"; }

if [ $# != 1 ]; then
    [ $# -gt 0 ] || fail "no tarball named"
    for tarball in "$@"; do
        "$0" "$tarball" || exit 1
    done
    exit 0
fi
tarball=$1
[ -f "$tarball" ] || fail "no tarball at $tarball"
if [ -f "$tarball.sha256" ]; then
    (cd "$(dirname "$tarball")" && sha256sum -c --quiet "$(basename "$tarball").sha256") \
        || fail "the tarball does not match its .sha256"
fi
root=$(mktemp -d "${TMPDIR:-/tmp}/vloer-release-root.XXXXXX")
trap 'rm -rf "$root"' EXIT
tar -xzf "$tarball" -C "$root"
dir=$(basename "$tarball" .tar.gz)
[ -d "$root/$dir" ] || fail "the tarball does not unpack into $dir/"
for f in vloer-run vloer-run.1 README.md SHA256SUMS completions/vloer-run.bash \
    completions/_vloer-run completions/vloer-run.fish; do
    [ -e "$root/$dir/$f" ] || fail "$f is missing"
done
(cd "$root/$dir" && sha256sum -c --quiet SHA256SUMS) || fail "SHA256SUMS does not match"
say "unpacked: $(cd "$root" && find . -type f | sort | tr '\n' ' ')"
arch=$(elf_arch "$root/$dir/vloer-run") || fail "the binary is not one vloer-run is released for"
case "$dir" in
    *"-$arch-unknown-linux-"*) ;;
    *) fail "the tarball's name does not say $arch, the machine its binary is for" ;;
esac
elf_is_static "$root/$dir/vloer-run" || fail "the binary needs a loader or a shared library"
say "the binary: static, for $arch"
emulator=()
if [ "$arch" != "$(host_arch)" ]; then
    if ! qemu=$(emulator_for "$arch" 2>/dev/null); then
        say "SKIPPED the PID 1 run: an $arch binary runs here only under qemu-user" \
            "(qemu-$arch-static, Debian: qemu-user-static), which is not installed"
        exit 0
    fi
    cp "$qemu" "$root/qemu"
    emulator=(/qemu)
fi

unshare_user=()
if [ "$(id -u)" != 0 ]; then
    if ! unshare --user --map-root-user true 2>/dev/null; then
        say "SKIPPED the PID 1 run: not root and no unprivileged user namespaces here"
        exit 0
    fi
    unshare_user=(--user --map-root-user)
fi
mkdir "$root/proc"
# The binary is its own child: it is the only program in the root (but qemu-user, for another
# machine's, which runs both).
set +e
out=$(timeout 60 unshare "${unshare_user[@]}" --pid --fork --mount --mount-proc --root "$root" \
    "${emulator[@]}" "/$dir/vloer-run" --verdict - -- "${emulator[@]}" "/$dir/vloer-run" --version \
    2>"$root/stderr")
status=$?
set -e
say "PID 1 run: exit $status"
echo "$out" | sed 's/^/    /'
[ "$status" = 0 ] || fail "vloer-run as PID 1 exited $status: $(cat "$root/stderr")"
echo "$out" | head -n 1 | grep -q '^vloer-run ' || fail "the child did not print its version"
verdict=$(echo "$out" | tail -n 1)
case "$verdict" in
    *'"stopped":true'*'"exit_code":0'*) ;;
    *) fail "no confirmed stop in the verdict: $verdict" ;;
esac
say "OK: $(basename "$tarball") unpacks, checks and runs as PID 1 in an empty root${emulator:+ (under qemu-user)}"
