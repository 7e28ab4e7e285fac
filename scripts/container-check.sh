#!/usr/bin/env bash
# vloer-run in a real container runtime: podman (runc), an image built from scratch with the
# static binary and Debian's busybox-static (imported with `podman import`, nothing pulled).
# Checks what users of docker/podman/Kubernetes rely on:
#   1. `podman stop` gives exit 143, the verdict is the last line of `podman logs`, and a setsid
#      daemon's TERM trap ran (it was stopped gracefully, after the entrypoint);
#   2. a non-root user with a bind-mounted termination log (mode 0666) gets the verdict there;
#   3. the preStop pattern, `podman exec C vloer-run stop`, exits 0 every time over 20 tries;
#   4. `podman run --init --init-path=vloer-run` runs the command under vloer-run as PID 1;
#   5. zombies are reaped;
#   6. examples/pod.yaml, played with `podman kube play` (its image built here under the yaml's
#      own name): the pod starts, a pod stop ends it, and the verdict says "stopped":true in the
#      termination-message file and, played with the verdict on stderr, as the last log line.
#
#   scripts/container-check.sh [BINARY]   (default: built by scripts/static-build.sh)
#
# Where podman cannot run (not installed, no busybox-static, a runtime that refuses this machine)
# it says why and exits 0; .ci/run installs what it needs. A failed check exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "container-check: FAIL: $*" >&2; exit 1; }
say() { echo "container-check: $*"; }
skip() { say "SKIPPED: $*"; exit 0; }

bin=${1:-}
if [ -z "$bin" ]; then
    bin=$(scripts/static-build.sh)
fi
command -v podman >/dev/null 2>&1 || skip "podman is not installed"
busybox=/bin/busybox
[ -x "$busybox" ] && { ldd "$busybox" 2>&1 || true; } | grep -Eq 'not a dynamic|statically linked' \
    || skip "no static busybox at $busybox (Debian: busybox-static)"

work=$(mktemp -d "${TMPDIR:-/tmp}/vloer-container.XXXXXX")
image=localhost/vloer-run-check:$$
names=()
pods=()
pod_image=
cleanup() {
    for n in "${names[@]}"; do podman rm -f -t 0 "$n" >/dev/null 2>&1 || true; done
    for y in "${pods[@]}"; do podman kube down "$y" >/dev/null 2>&1 || true; done
    podman rmi -f "$image" >/dev/null 2>&1 || true
    [ -z "$pod_image" ] || podman rmi -f "$pod_image" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
# runc: crun refuses hybrid cgroup hierarchies; limits below the machine's hard ones, which
# podman's defaults (1048576 open files) may exceed.
cat > "$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF=$work/containers.conf
if ! out=$(timeout 120 podman info 2>&1); then
    skip "podman cannot run here: $(echo "$out" | tail -n 1)"
fi

root=$work/root
mkdir -p "$root/bin" "$root/proc" "$root/dev" "$root/sys" "$root/tmp" "$root/etc"
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
for a in sh sleep setsid cat echo kill ps true tail; do ln -s busybox "$root/bin/$a"; done
cp "$bin" "$root/bin/vloer-run"
echo 'root:x:0:0::/:/bin/sh' > "$root/etc/passwd"
echo 'app:x:1000:1000::/tmp:/bin/sh' >> "$root/etc/passwd"
tar -C "$root" -cf "$work/image.tar" .
podman import -q "$work/image.tar" "$image" >/dev/null || fail "podman import"
say "image $image from scratch: $(cd "$root" && echo bin/*)"

run_d() {
    local name=vloer-check-$$-$1
    shift
    names+=("$name")
    podman run -d --name "$name" "$@" >/dev/null
    echo "$name"
}
wait_for() { # CONTAINER FILE: until the file exists inside
    for _ in $(seq 1 200); do
        podman exec "$1" /bin/sh -c "[ -e $2 ]" 2>/dev/null && return 0
        sleep 0.05
    done
    fail "$2 never appeared in $1"
}

# 1. podman stop: 143, the verdict last in the logs, the setsid daemon's trap ran.
c=$(run_d stop "$image" /bin/vloer-run -- /bin/sh -c \
    'setsid /bin/sh -c "trap \"echo daemon-term; exit 0\" TERM; touch /tmp/up; while :; do sleep 1; done" & exec sleep 600')
wait_for "$c" /tmp/up
podman stop -t 10 "$c" >/dev/null
code=$(podman inspect "$c" --format '{{.State.ExitCode}}')
logs=$(podman logs "$c" 2>&1)
last=$(echo "$logs" | tail -n 1)
[ "$code" = 143 ] || fail "podman stop: exit $code, not 143; logs: $logs"
case "$last" in *'"stopped":true'*'"reason":"signal"'*) ;; *) fail "the last log line is not the verdict: $last" ;; esac
echo "$logs" | grep -qx daemon-term || fail "the setsid daemon's TERM trap did not run: $logs"
say "1. podman stop: exit 143, verdict last in the logs, daemon's TERM trap ran"

# 2. Non-root, bind-mounted termination log (the kubelet makes it 0666).
touch "$work/termination-log"
chmod 0666 "$work/termination-log"
podman run --rm --user 1000:1000 -v "$work/termination-log:/dev/termination-log" "$image" \
    /bin/vloer-run --verdict /dev/termination-log -- /bin/sh -c 'sleep 300 & exit 0' \
    || fail "the non-root run failed"
grep -q '"stopped":true' "$work/termination-log" \
    || fail "no verdict in the termination log: $(cat "$work/termination-log")"
say "2. non-root (uid 1000): the verdict is in the bind-mounted termination log"

# 3. preStop: `podman exec C vloer-run stop` exits 0, 20 times out of 20.
for i in $(seq 1 20); do
    c=$(run_d prestop-$i "$image" /bin/vloer-run --control /tmp/ctl -- /bin/sleep 600)
    wait_for "$c" /tmp/ctl
    set +e
    podman exec "$c" /bin/vloer-run stop --control /tmp/ctl >"$work/prestop.out" 2>&1
    status=$?
    set -e
    [ "$status" = 0 ] || fail "preStop try $i: exit $status: $(cat "$work/prestop.out")"
    podman rm -f -t 0 "$c" >/dev/null
done
say "3. preStop stop through podman exec: exit 0 in 20 of 20 tries"

# 4. --init --init-path.
set +e
out=$(podman run --rm --init --init-path="$(realpath "$bin")" "$image" \
    /bin/sh -c 'cat /proc/1/cmdline | tr "\0" " "; echo; exit 3' 2>&1)
status=$?
set -e
[ "$status" = 3 ] || fail "--init-path: exit $status, not 3: $out"
echo "$out" | head -n 1 | grep -q 'vloer-run\|init' || fail "PID 1 is not the init: $out"
echo "$out" | tail -n 1 | grep -q '"stopped":true' || fail "no verdict with --init-path: $out"
say "4. --init --init-path: PID 1 is $(echo "$out" | head -n 1), exit 3, verdict written"

# 5. Zombies: orphans of a child that does not wait are reaped by PID 1.
out=$(podman run --rm "$image" /bin/vloer-run -- /bin/sh -c \
    '(sleep 0.1 & sleep 0.1 &); sleep 1; ps -o stat,comm | tail -n +2' 2>&1)
if echo "$out" | grep -E '^ *Z' >/dev/null; then fail "a zombie was left: $out"; fi
echo "$out" | tail -n 1 | grep -Eq '"reaped":[2-9]' || fail "the orphans were not reaped: $out"
say "5. zombies: both orphans reaped by PID 1, none left"
# 6. examples/pod.yaml with `podman kube play`. A pod needs podman's pause image, which podman
# builds from catatonit.
command -v catatonit >/dev/null 2>&1 || skip "6. no catatonit for podman's pause image (Debian: catatonit)"
pod_yaml=examples/pod.yaml
pod_image=$(sed -n 's/^ *image: *//p' "$pod_yaml")
pod=$(sed -n 's/^  name: *//p' "$pod_yaml" | head -n 1)
container=$pod-$(sed -n 's/^    - name: *//p' "$pod_yaml" | head -n 1)
# The yaml's image, built here: the binary where the yaml runs it, and a stand-in /app/server
# with a daemon of its own (setsid) that the stop must end too.
mkdir -p "$root/usr/local/bin" "$root/app" "$root/run"
cp "$bin" "$root/usr/local/bin/vloer-run"
cat > "$root/app/server" <<'SERVER'
#!/bin/sh
setsid sh -c 'trap "exit 0" TERM; while :; do sleep 1; done' &
trap 'echo "server: SIGTERM, exiting"; exit 0' TERM
echo "server: listening on $1"
while :; do sleep 1 & wait $!; done
SERVER
chmod 755 "$root/app/server"
tar -C "$root" -cf "$work/pod-image.tar" .
podman import -q "$work/pod-image.tar" "$pod_image" >/dev/null || fail "podman import $pod_image"
# Plays YAML, waits for its control socket, checks that the server and its daemon run, then stops
# the pod as `podman kube down` does (but keeps the container, to read its log).
play() {
    local yaml=$1
    pods+=("$yaml")
    podman kube play "$yaml" >"$work/play.out" 2>&1 || fail "podman kube play $yaml: $(cat "$work/play.out")"
    wait_for "$container" /run/vloer/control.sock
    local status
    status=$(podman exec "$container" /usr/local/bin/vloer-run status --control=/run/vloer/control.sock) \
        || fail "status through the pod's control socket: $status"
    case "$status" in *'/app/server --port=8080'*'trap \"exit 0\" TERM'*) ;;
        *) fail "the pod's status lacks the server or its daemon: $status" ;; esac
    # Whether podman gave the container the termination-message file itself, as the kubelet does.
    if podman exec "$container" /bin/sh -c '[ -e /dev/termination-log ]' 2>/dev/null; then
        honoured=yes
    else
        honoured=no
    fi
    podman pod stop -t 30 "$pod" >/dev/null || fail "podman pod stop $pod"
    pod_logs=$(podman logs "$container" 2>&1)
    pod_code=$(podman inspect "$container" --format '{{.State.ExitCode}}')
    podman kube down "$yaml" >/dev/null 2>&1 || fail "podman kube down $yaml"
}
# 6a. The verdict on stderr, everything else as the yaml has it: the last line of the log.
sed 's|--verdict=/dev/termination-log|--verdict=stderr|' "$pod_yaml" > "$work/pod-log.yaml"
grep -q -- '--verdict=stderr' "$work/pod-log.yaml" || fail "$pod_yaml no longer sets --verdict=/dev/termination-log"
play "$work/pod-log.yaml"
last=$(echo "$pod_logs" | tail -n 1)
case "$last" in *'"stopped":true'*'"reason":"signal"'*) ;; *) fail "6a. the last log line is not a true verdict: $pod_logs" ;; esac
echo "$pod_logs" | grep -qx 'server: SIGTERM, exiting' || fail "6a. the server did not get SIGTERM: $pod_logs"
[ "$pod_code" = 0 ] || fail "6a. the pod's container exited $pod_code, not 0 (the server's own): $pod_logs"
say "6a. podman kube play $pod_yaml (verdict on stderr): the pod stop ends it, exit 0, verdict last in the log"
podman_honours=$honoured
# 6b. The yaml as shipped. Where podman does not honour terminationMessagePath (it does not give
# the container the file, seen in 6a), the check gives the container what the kubelet does: a
# file writable by anyone, bind-mounted at that path.
if [ "$podman_honours" = yes ]; then
    fail "podman now honours terminationMessagePath: read the message where it keeps it, here"
fi
touch "$work/termination-log"
chmod 0666 "$work/termination-log"
sed 's|^\(\( *\)  mountPath: /run/vloer\)$|\1\n\2- name: termination-log\n\2  mountPath: /dev/termination-log|' \
    "$pod_yaml" > "$work/pod.yaml"
grep -q '^ *mountPath: /dev/termination-log$' "$work/pod.yaml" \
    || fail "$pod_yaml no longer mounts its control socket's folder at /run/vloer"
cat >> "$work/pod.yaml" <<YAML
    - name: termination-log
      hostPath:
        path: $work/termination-log
        type: File
YAML
play "$work/pod.yaml"
grep -q '"stopped":true' "$work/termination-log" \
    || fail "6b. no true verdict in the termination-message file: $(cat "$work/termination-log"); logs: $pod_logs"
[ "$(wc -l < "$work/termination-log")" = 1 ] || fail "6b. the termination message is not one line"
[ "$pod_code" = 0 ] || fail "6b. the pod's container exited $pod_code, not 0: $pod_logs"
say "6b. podman kube play $pod_yaml as shipped: the verdict is the termination message (podman honours terminationMessagePath: $podman_honours, so the check mounts the file as the kubelet does)"
say "OK: podman $(podman --version | awk '{print $3}') with runc"
