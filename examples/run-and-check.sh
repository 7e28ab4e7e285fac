#!/bin/sh
# Runs COMMAND under vloer-run, reads the verdict, and refuses to go on
# unless vloer-run proved that no process of the run is left.
#
#   usage: run-and-check.sh COMMAND [ARG]...
#   VLOER_RUN: the vloer-run to use (default: vloer-run from PATH)
#
# Exits with COMMAND's status when the stop was proven, else 125.
# Reads the verdict with jq, or with python3 when jq is missing.
set -u

vloer_run=${VLOER_RUN:-vloer-run}
verdict=$(mktemp "${TMPDIR:-/tmp}/verdict.XXXXXX") || exit 125
trap 'rm -f "$verdict"' EXIT

"$vloer_run" --verdict "$verdict" -- "$@"
status=$?

# field NAME: the verdict's field NAME as text ("" when absent).
field() {
    if command -v jq >/dev/null 2>&1; then
        jq -r --arg k "$1" \
            'if has($k) then .[$k] else "" end
             | if type == "string" then . else tojson end' "$verdict"
    else
        python3 -c 'import json, sys
v = json.load(open(sys.argv[1])).get(sys.argv[2], "")
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))
' "$verdict" "$1"
    fi
}

say() { echo "run-and-check: $*" >&2; }

if [ ! -s "$verdict" ]; then
    say "no verdict (vloer-run exit $status); refusing to go on"
    exit 125
fi
if [ "$(field stopped)" != true ]; then
    say "NOT proven stopped (vloer-run exit $status)"
    say "error: $(field error)"
    say "survivors: $(field survivors)"
    say "refusing to go on"
    exit 125
fi

say "reason $(field reason), nothing left; going on"
# The next step goes here: reuse the port, delete the work dir, ...
exit "$status"
