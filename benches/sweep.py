#!/usr/bin/env python3
"""One folder-sweep scan against `fuser -v DIR` and `lsof +D DIR`, on the same machine state.

    benches/sweep.py --vloer target/release/vloer-run \
        --helper target/release/examples/vloer-bench-helper [--reps 15] [--bystanders 5000] \
        [--threaded 20 --threads 200]

A scan is timed as the difference between a control-socket `status` of a run with `--sweep DIR`
and one of an identical run without it (the same socket round trip, the same tree), asked
straight over the socket, interleaved with `fuser -v DIR` and `lsof +D DIR` in each round.
Holders of DIR are started first (a working directory, a subfolder as working directory, an open
file, a deleted open file, a mapped library, an argument); the check is that the scan lists every
pid that fuser or lsof lists. Then the same with P multi-threaded bystanders (`--threaded`, each
with T threads that share its files, working directory and root), and then with N bystanders
holding 20 files each (beside DIR, on the same filesystem), and (as root, `--namespaced M`) with
M bystanders each in a mount namespace of its own (`unshare -m`). Standard library only; prints Markdown on stdout, progress on stderr.
Every process started here is killed by pid and reaped at the end.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def log(*a):
    print("sweep:", *a, file=sys.stderr, flush=True)


def status(sock):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sock)
    s.sendall(b'{"op":"status"}\n')
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    s.close()
    return json.loads(data)


def timed(fn):
    t = time.perf_counter_ns()
    out = fn()
    return time.perf_counter_ns() - t, out


def run(argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def pids_of(text):
    return {int(t.rstrip("cefFrmn")) for t in text.split() if t.rstrip("cefFrmn").isdigit()}


def wait_for(path, what):
    deadline = time.time() + 30
    while not os.path.exists(path):
        if time.time() > deadline:
            raise SystemExit(f"{what} did not come up")
        time.sleep(0.01)


def holders(work, top):
    """Processes that hold or name `work` in each way fuser and lsof can see, and more."""
    os.makedirs(f"{work}/sub", exist_ok=True)
    with open(f"{work}/file", "w") as f:
        f.write("data")
    lib = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6") if os.path.exists(p)), None)
    env = dict(os.environ, F=f"{work}/file", G=f"{work}/sub/gone")
    open(env["G"], "w").close()
    procs = [
        subprocess.Popen(["sleep", "1000"], cwd=work),
        subprocess.Popen(["sleep", "1000"], cwd=f"{work}/sub"),
        subprocess.Popen(["sh", "-c", 'exec 3<"$F"; exec sleep 1000'], cwd="/", env=env),
        subprocess.Popen(["sh", "-c", 'exec 3<"$G"; exec sleep 1000'], cwd="/", env=env),
        subprocess.Popen(["sh", "-c", "sleep 1000; :", "sh", f"{work}/not-yet"], cwd="/"),
    ]
    if lib:
        shutil.copy(lib, f"{work}/libpre.so")
        procs.append(subprocess.Popen(["sleep", "1000"], cwd="/", env=dict(os.environ, LD_PRELOAD=f"{work}/libpre.so")))
    deadline = time.time() + 30
    while not all(os.readlink(f"/proc/{p.pid}/exe").endswith("sleep") for p in procs if p.args[0] == "sh" and "exec" in p.args[2]):
        if time.time() > deadline:
            raise SystemExit("holders did not start")
        time.sleep(0.01)
    os.unlink(env["G"])
    return procs


def threaded_bystanders(side, n, threads):
    """N processes with `threads` threads each, in `side`, one file open there: every thread
    shares its process's file table, working directory and root."""
    script = (
        "import os, sys, threading, time\n"
        "f = open(sys.argv[1] + '/t' + str(os.getpid()), 'w')\n"
        "threading.stack_size(65536)\n"
        "for _ in range(int(sys.argv[2])):\n"
        "    threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()\n"
        "print('ready', flush=True)\n"
        "time.sleep(1000)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, side, str(threads)], cwd=side, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) for _ in range(n)]
    for p in procs:
        if p.stdout.readline().strip() != b"ready":
            raise SystemExit("threaded bystanders did not start")
    return procs


def namespaced_bystanders(side, n):
    """N sleepers in `side`, each in a mount namespace of its own: a table more for the scan to
    read and parse each."""
    procs = [subprocess.Popen(["unshare", "-m", "--propagation", "unchanged", "sleep", "1000"], cwd=side, stdin=subprocess.DEVNULL) for _ in range(n)]
    deadline = time.time() + 60
    for p in procs:
        while not os.readlink(f"/proc/{p.pid}/exe").endswith("sleep"):
            if p.poll() is not None:
                raise SystemExit("unshare -m failed (not root?)")
            if time.time() > deadline:
                raise SystemExit("namespaced bystanders did not start")
            time.sleep(0.01)
    return procs


def measure(vloer, work, sock_with, sock_without, reps):
    rows = {"scan": [], "with": [], "without": [], "fuser": [], "lsof": []}
    found = {}
    for _ in range(reps):
        t_with, st = timed(lambda: status(sock_with))
        t_without, _ = timed(lambda: status(sock_without))
        t_fuser, fu = timed(lambda: run(["fuser", work]))
        t_fuser_v, _ = timed(lambda: run(["fuser", "-v", work]))
        t_lsof, ls = timed(lambda: run(["lsof", "-t", "+D", work]))
        rows["with"].append(t_with)
        rows["without"].append(t_without)
        rows["scan"].append(t_with - t_without)
        rows["fuser"].append(t_fuser_v)
        rows["lsof"].append(t_lsof)
        found = {
            "vloer": {h["pid"] for h in st["sweep"]["holders"]},
            "fuser": pids_of(fu.stdout),
            "lsof": pids_of(ls.stdout),
            "error": st["sweep"].get("error"),
        }
    return {k: statistics.median(v) for k, v in rows.items()}, found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vloer", required=True)
    ap.add_argument("--helper", required=True)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--bystanders", type=int, default=5000)
    ap.add_argument("--fds", type=int, default=20)
    ap.add_argument("--threaded", type=int, default=20)
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--namespaced", type=int, default=0)
    a = ap.parse_args()
    for tool in ("fuser", "lsof"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing (apt-get install psmisc lsof)")
    top = tempfile.mkdtemp(prefix="vloer-sweep-bench.")
    work, side = f"{top}/work", f"{top}/side"
    os.makedirs(work)
    os.makedirs(side)
    started = []
    # vloer-run itself holds each swept folder (O_PATH, so a rename is followed): fuser and lsof
    # list it, and by the contract it is never a match.
    own = set()
    try:
        started += holders(work, top)
        runs = {}
        for name, extra in (("with", ["--sweep", work]), ("without", [])):
            sock = f"{top}/{name}.sock"
            runs[name] = sock
            started.append(subprocess.Popen([a.vloer, "--verdict", "off", "--control", sock, *extra, "--", "sleep", "1000"], cwd="/", stdin=subprocess.DEVNULL))
            own.add(started[-1].pid)
            wait_for(sock, f"vloer-run {name} --sweep")
        nproc = sum(1 for d in os.listdir("/proc") if d.isdigit())
        log(f"plain: {nproc} processes, {a.reps} rounds")
        plain, found_plain = measure(a.vloer, work, runs["with"], runs["without"], a.reps)
        def among(procs, what):
            """Measures with `procs` running, then stops them."""
            started.extend(procs)
            n = sum(1 for d in os.listdir("/proc") if d.isdigit())
            log(f"with {what}: {n} processes, {a.reps} rounds")
            got = measure(a.vloer, work, runs["with"], runs["without"], a.reps)
            for p in procs:
                p.kill()
                p.wait()
            return n, *got

        nproc_t, many, found_many = among(threaded_bystanders(side, a.threaded, a.threads), f"{a.threaded} bystanders of {a.threads} threads")
        spaced, found_spaced, nproc_ns = None, None, 0
        if a.namespaced:
            nproc_ns, spaced, found_spaced = among(namespaced_bystanders(side, a.namespaced), f"{a.namespaced} bystanders in mount namespaces of their own")
        idle = subprocess.Popen([a.helper, "idle", str(a.bystanders), str(a.fds), side], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
        started.append(idle)
        if idle.stdout.readline().strip() != b"ready":
            raise SystemExit("bystanders did not start")
        nproc2 = sum(1 for d in os.listdir("/proc") if d.isdigit())
        log(f"with bystanders: {nproc2} processes, {max(3, a.reps // 3)} rounds")
        busy, found_busy = measure(a.vloer, work, runs["with"], runs["without"], max(3, a.reps // 3))
    finally:
        for p in started:
            try:
                for c in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split():
                    os.kill(int(c), 9)
            except OSError:
                pass
            p.kill()
            p.wait()
        shutil.rmtree(top, ignore_errors=True)

    def ms(ns):
        return f"{ns / 1e6:.1f} ms"

    print(f"| machine state | processes | one scan (status with − without) | fuser -v DIR | lsof +D DIR | scan / fuser | scan / lsof | found: scan, fuser, lsof | scan ⊇ both |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = (
        ("plain", nproc, plain, found_plain),
        (f"{a.threaded} bystanders × {a.threads} threads", nproc_t, many, found_many),
        (f"{a.bystanders} bystanders × {a.fds} fds", nproc2, busy, found_busy),
    ) + (((f"{a.namespaced} bystanders in mount namespaces", nproc_ns, spaced, found_spaced),) if spaced else ())
    for label, n, r, f in rows:
        f["fuser"] -= own
        f["lsof"] -= own
        covers = f["fuser"] <= f["vloer"] and f["lsof"] <= f["vloer"]
        print(f"| {label} | {n} | {ms(r['scan'])} | {ms(r['fuser'])} | {ms(r['lsof'])} | {r['scan'] / r['fuser']:.2f} | {r['scan'] / r['lsof']:.2f} | {len(f['vloer'])}, {len(f['fuser'])}, {len(f['lsof'])} | {'yes' if covers and not f['error'] else 'NO'} |")
        if not covers:
            log(f"{label}: missed {(f['fuser'] | f['lsof']) - f['vloer']}")
    log(f"status round trip without --sweep: plain {ms(plain['without'])}, busy {ms(busy['without'])}")


main()
