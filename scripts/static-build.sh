#!/usr/bin/env bash
# Builds the static vloer-run a user deploys and prints its path (the build's own output goes to
# stderr). Every script that needs the static binary builds it here. It builds for the machine it
# runs on, x86_64 or aarch64 (ARCH below), unless told otherwise.
#
#   scripts/static-build.sh             musl (ARCH-unknown-linux-musl, static by default): the
#                                       release binary; `rustup target add ARCH-unknown-linux-musl`
#   scripts/static-build.sh --glibc     glibc with +crt-static (ARCH-unknown-linux-gnu), for a
#                                       toolchain without the musl target (about 60% larger)
#   scripts/static-build.sh --target T  for target T, another machine's too: `--target
#                                       aarch64-unknown-linux-musl` on x86_64 links with
#                                       aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu) unless
#                                       CARGO_TARGET_<T>_LINKER names another linker
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/arch.sh

usage() {
    echo "usage: scripts/static-build.sh [--glibc | --target TARGET]" >&2
    exit 2
}
target=
case "${1:-}" in
    "") ;;
    --glibc) [ $# = 1 ] || usage; target=$(host_arch)-unknown-linux-gnu ;;
    --target) [ $# = 2 ] || usage; target=$2 ;;
    *) usage ;;
esac
if [ -z "$target" ]; then
    case "$(host_arch)" in
        x86_64 | aarch64) target=$(host_arch)-unknown-linux-musl ;;
        *)
            echo "static-build: vloer-run is released for x86_64 and aarch64, not for this" \
                "$(uname -m) machine; name a target: scripts/static-build.sh --target TARGET" >&2
            exit 1
            ;;
    esac
fi
rustflags=${RUSTFLAGS:-}
case "$target" in
    # --target keeps build scripts and proc macros dynamic; only the shipped binary is static.
    *-gnu*) rustflags="$rustflags -C target-feature=+crt-static" ;;
esac
if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx "$target"; then
    echo "static-build: the $target target is not installed: rustup target add $target" \
        "(or scripts/static-build.sh --glibc)" >&2
    exit 1
fi
use_cross_linker "$target" || exit 1
RUSTFLAGS=$rustflags cargo build --release --target "$target" >&2
echo "${CARGO_TARGET_DIR:-target}/$target/release/vloer-run"
