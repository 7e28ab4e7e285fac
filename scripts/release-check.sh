#!/usr/bin/env bash
# Checks a release tarball as a user would use it: it unpacks into an empty root, its SHA256SUMS
# match, and its vloer-run runs there as PID 1 (no shared library, no /bin, nothing else), stops
# its child and confirms it.
#
#   scripts/release-check.sh dist/vloer-run-VERSION-TARGET.tar.gz
#
# Needs root or unprivileged user namespaces (else it says so and exits 0); a failure exits 1.
set -euo pipefail
fail() { echo "release-check: FAIL: $*" >&2; exit 1; }
say() { echo "release-check: $*"; }

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

unshare_user=()
if [ "$(id -u)" != 0 ]; then
    if ! unshare --user --map-root-user true 2>/dev/null; then
        say "SKIPPED the PID 1 run: not root and no unprivileged user namespaces here"
        exit 0
    fi
    unshare_user=(--user --map-root-user)
fi
mkdir "$root/proc"
# The binary is its own child: it is the only program in the root.
set +e
out=$(timeout 60 unshare "${unshare_user[@]}" --pid --fork --mount --mount-proc --root "$root" \
    "/$dir/vloer-run" --verdict - -- "/$dir/vloer-run" --version 2>"$root/stderr")
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
say "OK: $(basename "$tarball") unpacks, checks and runs as PID 1 in an empty root"
