#!/usr/bin/env bash
# Builds the static vloer-run a user deploys and prints its path (the build's own output goes to
# stderr). Every script that needs the static binary builds it here.
#
#   scripts/static-build.sh          musl (x86_64-unknown-linux-musl, static by default): the
#                                    release binary; `rustup target add x86_64-unknown-linux-musl`
#   scripts/static-build.sh --glibc  glibc with +crt-static, for a toolchain without the musl
#                                    target (about 60% larger, see the README)
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
    "") target=x86_64-unknown-linux-musl; rustflags=${RUSTFLAGS:-} ;;
    --glibc)
        target=x86_64-unknown-linux-gnu
        # --target keeps build scripts and proc macros dynamic; only the shipped binary is static.
        rustflags="${RUSTFLAGS:-} -C target-feature=+crt-static" ;;
    *) echo "usage: scripts/static-build.sh [--glibc]" >&2; exit 2 ;;
esac
if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx "$target"; then
    echo "static-build: the $target target is not installed: rustup target add $target" \
        "(or scripts/static-build.sh --glibc)" >&2
    exit 1
fi
RUSTFLAGS=$rustflags cargo build --release --target "$target" >&2
echo "${CARGO_TARGET_DIR:-target}/$target/release/vloer-run"
