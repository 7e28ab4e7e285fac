#!/usr/bin/env bash
# vloer-run side by side with tini, dumb-init and catatonit; prints one Markdown table.
#
#   benches/compare.sh            the full run (about 2 minutes on 2 cores)
#   benches/compare.sh --quick    fewer repetitions, for a quick look
#   benches/compare.sh --only 15  only workloads 1 and 5
#
# Installs nothing: tini, dumb-init and catatonit are used when on PATH
# (apt-get install tini dumb-init catatonit). Workload 2 needs root for unshare --pid.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --quiet --bin vloer-run
cargo build --release --quiet --example vloer-bench-helper
exec python3 benches/compare.py --vloer "$target/release/vloer-run" --helper "$target/release/examples/vloer-bench-helper" "$@"
