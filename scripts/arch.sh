# Sourced by the scripts that build, check or pack a binary: the two architectures vloer-run is
# released for (x86_64, aarch64), how to tell which one a binary is for, and what builds and runs
# the other one on this machine. Each function prints its answer, or says why not on stderr (in
# the calling script's name) and returns 1.

arch_say() { echo "$(basename "$0" .sh): $*" >&2; }

# This machine's architecture as Rust targets name it: x86_64 or aarch64 (else uname's own word).
host_arch() {
    case "$(uname -m)" in
        x86_64 | amd64) echo x86_64 ;;
        aarch64 | arm64) echo aarch64 ;;
        *) uname -m ;;
    esac
}

# The architecture an ELF binary is for, from its header's e_machine (two little-endian bytes at
# offset 18): what a file name or the build machine cannot prove.
elf_arch() {
    local magic machine
    magic=$(od -An -tx1 -N4 "$1" | tr -d ' \n')
    machine=$(od -An -tx1 -j18 -N2 "$1" | tr -d ' \n')
    if [ "$magic" != 7f454c46 ]; then
        arch_say "$1 is not an ELF binary"
        return 1
    fi
    case "$machine" in
        3e00) echo x86_64 ;;
        b700) echo aarch64 ;;
        *)
            arch_say "$1 is for a machine vloer-run is not released for (ELF e_machine 0x$machine)"
            return 1
            ;;
    esac
}

# Whether an ELF binary needs no loader and no shared library (no PT_INTERP, no DT_NEEDED), read
# from its headers: ldd cannot tell for another machine's binary (it calls any of them "not a
# dynamic executable").
elf_is_static() {
    local readelf
    readelf=$(command -v readelf || command -v "$(elf_arch "$1")-linux-gnu-readelf") || {
        arch_say "readelf is needed to read $1's headers (Debian: binutils)"
        return 1
    }
    ! "$readelf" -lW "$1" | grep -q INTERP && ! "$readelf" -dW "$1" | grep -q '(NEEDED)'
}

# What runs a binary of architecture $1 here: nothing for this machine's own, else qemu-user's
# path.
emulator_for() {
    local q
    [ "$1" = "$(host_arch)" ] && return 0
    for q in "qemu-$1-static" "qemu-$1"; do
        if command -v "$q" >/dev/null 2>&1; then
            command -v "$q"
            return 0
        fi
    done
    arch_say "an $1 binary on this $(host_arch) machine runs only under qemu-user:" \
        "qemu-$1-static (Debian: qemu-user-static)"
    return 1
}

# Exports the linker cargo needs to build for target $1 on another machine (ARCH-linux-gnu-gcc,
# Debian's gcc-ARCH-linux-gnu), unless it is this machine's own target or the environment names
# a linker already (CARGO_TARGET_<TARGET>_LINKER).
use_cross_linker() {
    local arch=${1%%-*} var
    var=CARGO_TARGET_$(echo "$1" | tr 'a-z-' 'A-Z_')_LINKER
    [ "$arch" = "$(host_arch)" ] && return 0
    [ -n "${!var:-}" ] && return 0
    if ! command -v "$arch-linux-gnu-gcc" >/dev/null 2>&1; then
        arch_say "a build for $1 on this $(host_arch) machine needs a cross linker:" \
            "$arch-linux-gnu-gcc (Debian: gcc-${arch//_/-}-linux-gnu), or $var"
        return 1
    fi
    export "$var=$arch-linux-gnu-gcc"
}
