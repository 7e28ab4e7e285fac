#!/usr/bin/env bash
# Builds the release anyone can download: the static binary, the manual, the completions, the
# README and SHA256SUMS (of those files) in one tarball named with the version and the target the
# binary was built for (read from the binary: musl or gnu), plus the tarball's own checksum.
#
#   scripts/release.sh [--bin BINARY] [OUTDIR]     (default OUTDIR: dist)
#
# With --bin, an existing static build is packed (what .ci/run does after scripts/static-check.sh);
# otherwise it is built here as the README documents. scripts/release-check.sh TARBALL unpacks
# the result into an empty root and runs it as PID 1.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=
if [ "${1:-}" = --bin ]; then
    bin=$2
    shift 2
fi
out=${1:-dist}
if [ -z "$bin" ]; then
    bin=$(scripts/static-build.sh)
fi
[ -x "$bin" ] || { echo "release: $bin is not an executable" >&2; exit 1; }

# A static glibc carries its tunables' names ("glibc.malloc..."); musl has no such text.
if grep -aq 'glibc\.malloc' "$bin"; then
    target=x86_64-unknown-linux-gnu
else
    target=x86_64-unknown-linux-musl
fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
name=vloer-run-$version-$target
stage=$(mktemp -d "${TMPDIR:-/tmp}/vloer-release.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/completions" "$out"
install -m 0755 "$bin" "$stage/$name/vloer-run"
install -m 0644 man/vloer-run.1 README.md "$stage/$name/"
install -m 0644 completions/vloer-run.bash completions/_vloer-run completions/vloer-run.fish \
    "$stage/$name/completions/"
(cd "$stage/$name" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort \
    | xargs sha256sum > SHA256SUMS)
# The same bytes for the same inputs: sorted names, no owner, the commit's time.
mtime=$(git log -1 --format=%ct 2>/dev/null || echo 0)
tarball=$out/$name.tar.gz
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" \
    -C "$stage" -cf - "$name" | gzip -n -9 > "$tarball"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
echo "release: $tarball ($(stat -c %s "$tarball") bytes)"
