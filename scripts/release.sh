#!/usr/bin/env bash
# Builds the release anyone can download, one tarball per architecture: the static binary, the
# manual, the completions, the README and SHA256SUMS (of those files), named with the version and
# the target the binary was built for (read from the binary: its ELF machine, musl or glibc), each
# with the tarball's own checksum beside it. Every tarball has the same layout.
#
#   scripts/release.sh [--bin BINARY]... [OUTDIR]     (default OUTDIR: dist)
#
# Without --bin, both release targets are built here (scripts/static-build.sh --target):
# x86_64-unknown-linux-musl and aarch64-unknown-linux-musl, one of them a cross build (its linker:
# scripts/static-build.sh). Each --bin packs an existing static build instead (what .ci/run and
# scripts/cross-check.sh do after checking it). scripts/release-check.sh TARBALL unpacks a result
# into an empty root and runs it as PID 1 (another machine's under qemu-user).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/arch.sh

bins=()
while [ "${1:-}" = --bin ]; do
    bins+=("$2")
    shift 2
done
out=${1:-dist}
if [ ${#bins[@]} = 0 ]; then
    for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
        bin=$(scripts/static-build.sh --target "$target")
        bins+=("$bin")
    done
fi

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
# The same bytes for the same inputs: sorted names, no owner, the commit's time.
mtime=$(git log -1 --format=%ct 2>/dev/null || echo 0)
stage=$(mktemp -d "${TMPDIR:-/tmp}/vloer-release.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"

# Packs one static binary into OUTDIR/vloer-run-VERSION-TARGET.tar.gz and its .sha256.
pack() {
    local bin=$1 arch libc name tarball
    [ -x "$bin" ] || { echo "release: $bin is not an executable" >&2; exit 1; }
    arch=$(elf_arch "$bin") || exit 1
    # A static glibc carries its tunables' names ("glibc.malloc..."); musl has no such text.
    if grep -aq 'glibc\.malloc' "$bin"; then libc=gnu; else libc=musl; fi
    name=vloer-run-$version-$arch-unknown-linux-$libc
    mkdir -p "$stage/$name/completions"
    install -m 0755 "$bin" "$stage/$name/vloer-run"
    install -m 0644 man/vloer-run.1 README.md "$stage/$name/"
    install -m 0644 completions/vloer-run.bash completions/_vloer-run completions/vloer-run.fish \
        "$stage/$name/completions/"
    (cd "$stage/$name" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort \
        | xargs sha256sum > SHA256SUMS)
    tarball=$out/$name.tar.gz
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" \
        -C "$stage" -cf - "$name" | gzip -n -9 > "$tarball"
    (cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
    echo "release: $tarball ($(stat -c %s "$tarball") bytes)"
}

for bin in "${bins[@]}"; do
    pack "$bin"
done
