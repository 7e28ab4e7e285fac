#!/usr/bin/env python3
"""vloer-run side by side with tini, dumb-init and catatonit: one run, interleaved, one table.

Run it through benches/compare.sh, which builds vloer-run and the workload helper first. Python 3.9+
standard library only; installs nothing. The wrappers that are not on PATH are left out (the notes
under the table say which). Progress goes to stderr; stdout gets only the Markdown.

Every process this starts gets a "lifeline" as its stdin: a pipe whose write end only this script
holds. The helpers block reading it and exit on EOF, so closing it (or this script dying) ends
them all. What is still alive at the end of a workload is killed through a pidfd, by pid. This
script is a child subreaper, so orphans left behind by a wrapper come back here to be reaped.
"""

import argparse
import ctypes
import datetime
import json
import os
import platform
import select
import shutil
import signal
import statistics
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
SIGDEF = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
MS = 1e6  # ns per ms
US = 1e3  # ns per µs


def log(*a):
    print("compare:", *a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# Processes


class Child:
    """A process started with posix_spawn: lifeline on stdin, optional pipes on stdout/stderr."""

    def __init__(self, argv, out=False, err=False):
        fa = []
        closers = []
        life_r, self.life_w = os.pipe()
        fa.append((os.POSIX_SPAWN_DUP2, life_r, 0))
        closers.append(life_r)
        self.out_r = self.err_r = None
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        closers.append(null)
        if out:
            self.out_r, w = os.pipe()
            fa.append((os.POSIX_SPAWN_DUP2, w, 1))
            closers.append(w)
        else:
            fa.append((os.POSIX_SPAWN_DUP2, null, 1))
        if err:
            self.err_r, w = os.pipe()
            fa.append((os.POSIX_SPAWN_DUP2, w, 2))
            closers.append(w)
        else:
            fa.append((os.POSIX_SPAWN_DUP2, null, 2))
        self.argv = argv
        try:
            self.pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=fa, setsigdef=SIGDEF)
        finally:
            for fd in closers:
                os.close(fd)
        self.pidfd = os.pidfd_open(self.pid)
        self.buf = b""
        self.status = None

    def readline(self, timeout):
        """One line of stdout, or None when it does not come within `timeout` seconds."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.out_r], [], [], left)
            if not r:
                return None
            chunk = os.read(self.out_r, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode()

    def drain_err(self):
        """Whatever is in the stderr pipe now, without waiting for EOF (descendants may hold it)."""
        data = b""
        while self.err_r is not None and select.select([self.err_r], [], [], 0)[0]:
            chunk = os.read(self.err_r, 1 << 16)
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace")

    def wait(self, timeout):
        """The wait status, or None if it is still running after `timeout` seconds."""
        if self.status is None:
            if not select.select([self.pidfd], [], [], timeout)[0]:
                return None
            _, self.status = os.waitpid(self.pid, 0)
        return self.status

    def end(self, sig=signal.SIGTERM, timeout=5.0):
        """Closes the lifeline, stops the process if need be, reaps it, closes every descriptor."""
        if self.life_w is not None:
            os.close(self.life_w)
            self.life_w = None
        if self.status is None and self.wait(0) is None:
            try:
                signal.pidfd_send_signal(self.pidfd, sig)
            except ProcessLookupError:
                pass
            if self.wait(timeout) is None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                self.wait(timeout)
        for fd in (self.pidfd, self.out_r, self.err_r):
            if fd is not None:
                os.close(fd)
        self.pidfd = self.out_r = self.err_r = None


def reap_orphans():
    """Reaps orphans that came back to us (we are a subreaper); our own Child objects wait first."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def pidfds_for(pids):
    """pid -> pidfd for every pid that still exists."""
    out = {}
    for p in pids:
        try:
            out[p] = os.pidfd_open(p)
        except ProcessLookupError:
            pass
    return out


def kill_left(pidfds):
    for fd in pidfds.values():
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except ProcessLookupError:
            pass


def status_field(pid, name):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except FileNotFoundError:
        return None
    return None


def median(xs):
    return statistics.median(xs) if xs else None


# ----------------------------------------------------------------------------------------------
# Wrappers


class Wrapper:
    def __init__(self, name, path, plain, group, pid1, flags):
        self.name = name
        self.path = path
        self.plain = plain  # not PID 1, as a user would run it around a command
        self.group = group  # not PID 1, set up to stop the child's whole group on SIGTERM
        self.pid1 = pid1  # as PID 1 of a pid namespace
        self.flags = flags  # how the notes describe the choice


def find_wrappers(vloer):
    ws = [Wrapper("vloer-run", vloer, [vloer, "--"], [vloer, "--"], [vloer, "--"], "`vloer-run --` (defaults: scope tree, forward to group)")]
    missing = []
    t = shutil.which("tini")
    if t:
        ws.append(Wrapper("tini", t, [t, "-s", "--"], [t, "-s", "-g", "--"], [t, "--"], "`tini -s --`; stop: `tini -s -g --`; PID 1: `tini --`"))
    else:
        missing.append("tini")
    d = shutil.which("dumb-init")
    if d:
        ws.append(Wrapper("dumb-init", d, [d, "--"], [d, "--"], [d, "--"], "`dumb-init --` (default setsid mode: signals go to the child's group)"))
    else:
        missing.append("dumb-init")
    c = shutil.which("catatonit")
    if c:
        ws.append(Wrapper("catatonit", c, [c, "--"], [c, "-g", "--"], [c, "--"], "`catatonit --` (always a subreaper); stop: `catatonit -g --`"))
    else:
        missing.append("catatonit")
    return ws, missing


def rotated(items, i):
    """Interleaving: every round starts with a different wrapper, so none always runs first."""
    k = i % len(items)
    return items[k:] + items[:k]


# ----------------------------------------------------------------------------------------------
# Workloads


def w_startup(ws, vloer, runs):
    """1. `WRAPPER -- true`, bare `true` as the floor; also `vloer-run --verdict off -- true`."""
    true = shutil.which("true") or "/bin/true"
    variants = [("bare true", [true])] + [(w.name, w.plain + [true]) for w in ws]
    variants.append(("vloer-run --verdict off", [vloer, "--verdict", "off", "--", true]))
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    fa = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)]
    times = {name: [] for name, _ in variants}
    for _ in range(5):  # warm the page cache
        for name, argv in variants:
            os.waitpid(os.posix_spawn(argv[0], argv, os.environ, file_actions=fa, setsigdef=SIGDEF), 0)
    for i in range(runs):
        for name, argv in rotated(variants, i):
            t0 = time.perf_counter_ns()
            pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=fa, setsigdef=SIGDEF)
            _, st = os.waitpid(pid, 0)
            t1 = time.perf_counter_ns()
            if os.waitstatus_to_exitcode(st) != 0:
                raise SystemExit(f"{argv} exited {os.waitstatus_to_exitcode(st)}")
            times[name].append(t1 - t0)
    os.close(null)
    return {k: median(v) for k, v in times.items()}


def w_storm(ws, helper, n, reps):
    """2. Each wrapper as PID 1 of a new pid namespace; the helper orphans N grandchildren that
    exit at once. Returns name -> (median ns until none remains, max zombies seen, samples)."""
    unshare = shutil.which("unshare")
    if not unshare:
        return None, "unshare not found"
    res = {w.name: [] for w in ws}
    for i in range(reps):
        for w in rotated(ws, i):
            c = Child([unshare, "--pid", "--fork", "--mount-proc"] + w.pid1 + [helper, "storm", str(n)], out=True, err=True)
            line = c.readline(120)
            st = c.wait(30)
            err = c.drain_err()
            c.end(signal.SIGKILL)
            reap_orphans()
            if not line or not line.startswith("storm "):
                return None, f"{w.name} as PID 1: no result ({line!r}, status {st}, stderr {err.strip()[:200]!r})"
            _, ns, zombies, samples, _ = line.split()
            res[w.name].append((int(ns), None if zombies == "-" else int(zombies), int(samples)))
    out = {}
    for name, runs in res.items():
        zs = [z for _, z, _ in runs if z is not None]
        out[name] = (median([ns for ns, _, _ in runs]), max(zs) if zs else None, median([s for _, _, s in runs]))
    return out, None


def w_idle_and_memory(ws, seconds):
    """3 and 4. Every wrapper around `sleep` at once; voluntary context switches over `seconds`,
    then VmHWM."""
    sleep = shutil.which("sleep") or "/bin/sleep"
    kids = {w.name: Child(w.plain + [sleep, str(int(seconds + 5))]) for w in ws}
    time.sleep(1.0)
    before = {k: status_field(c.pid, "voluntary_ctxt_switches") for k, c in kids.items()}
    time.sleep(seconds)
    after = {k: status_field(c.pid, "voluntary_ctxt_switches") for k, c in kids.items()}
    hwm = {k: status_field(c.pid, "VmHWM") for k, c in kids.items()}
    for c in kids.values():
        c.end(signal.SIGTERM)
    reap_orphans()
    wake = {k: (after[k] - before[k]) / seconds if None not in (after[k], before[k]) else None for k in kids}
    return wake, hwm


def fill_pipe(fd):
    """Fills a pipe through `fd` (our own file description, made non-blocking here) until not
    one more byte fits."""
    os.set_blocking(fd, False)
    for size in (65536, 4096, 1):
        try:
            while True:
                os.write(fd, b"x" * size)
        except BlockingIOError:
            pass


def blocked_writing(pid):
    """Whether the process sleeps in write(2) (its syscall number is 1 on x86_64, 64 on arm64)."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            if f.read().strip() == "pipe_write":
                return True
        with open(f"/proc/{pid}/syscall") as f:
            return f.read().split()[0] in ("1", "64")
    except (OSError, IndexError):
        return False


def end_of_run_hwm(vloer, helper, tree):
    """4, vloer-run's peak at the very end of a run: the verdict goes to stdout, a pipe that is
    full, so the final write blocks and VmHWM can be read after the stop, the confirmation and
    the verdict's serialisation. `tree`: run a 200-process tree and stop it with SIGTERM;
    otherwise `-- true`."""
    r, w = os.pipe()
    # Our own open file description of the pipe (a dup would share O_NONBLOCK with the child's).
    keep = os.open(f"/proc/self/fd/{w}", os.O_WRONLY | os.O_CLOEXEC)
    life_r, life_w = os.pipe()
    argv = [vloer, "--verdict", "-", "--"] + ([helper, "tree", "200"] if tree else [shutil.which("true") or "/bin/true"])
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    pid = os.posix_spawn(argv[0], argv, os.environ, setsigdef=SIGDEF,
                         file_actions=[(os.POSIX_SPAWN_DUP2, life_r, 0), (os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
    os.close(w)
    os.close(life_r)
    os.close(null)
    pidfd = os.pidfd_open(pid)
    try:
        if tree:
            buf = b""
            while b"\n" not in buf and select.select([r], [], [], 60)[0]:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                buf += chunk
            fill_pipe(keep)
            os.kill(pid, signal.SIGTERM)
        else:
            fill_pipe(keep)
        hwm = None
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if blocked_writing(pid):
                hwm = status_field(pid, "VmHWM")
                break
            if select.select([pidfd], [], [], 0.002)[0]:
                break
        return hwm
    finally:
        os.close(keep)
        os.close(life_w)
        os.set_blocking(r, False)
        try:
            while os.read(r, 1 << 16):
                pass
        except BlockingIOError:
            pass
        if not select.select([pidfd], [], [], 10)[0]:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(pidfd)
        os.close(r)
        reap_orphans()


def w_latency(ws, helper, rounds):
    """5. SIGUSR1 to the wrapper until the child's handler runs (its CLOCK_MONOTONIC stamp)."""
    kids = {}
    try:
        for w in ws:
            c = Child(w.plain + [helper, "usr1"], out=True)
            kids[w.name] = c
            if c.readline(10) != "ready":
                raise SystemExit(f"{w.name}: usr1 helper did not start")
        lat = {k: [] for k in kids}
        names = list(kids)
        for i in range(rounds):
            for name in rotated(names, i):
                c = kids[name]
                t0 = time.monotonic_ns()
                os.kill(c.pid, signal.SIGUSR1)
                line = c.readline(5)
                if line is None:
                    raise SystemExit(f"{name}: SIGUSR1 never reached the child")
                lat[name].append(int(line) - t0)
        return {k: median(v) for k, v in lat.items()}
    finally:
        for c in kids.values():
            c.end(signal.SIGTERM)
        reap_orphans()


def wrapper_cpu_ns(pid):
    """The time on the CPU of `pid`'s main thread, in ns (/proc/PID/schedstat), or None."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop_once(argv, helper, n, daemon, linger=0.3):
    """Starts a tree of n processes (+1 setsid daemon) under argv, waits until every one is up,
    sends SIGTERM to the wrapper, and waits for the wrapper's exit and each tree process's exit.
    Returns (ns until the wrapper exited and nothing of the tree was alive or None, processes
    left behind `linger` s after the wrapper exited, verdict dict or None, the CPU time in ns of
    the wrapper's main thread over its whole run or None)."""
    c = Child(argv + [helper, "tree", str(n)] + (["--daemon"] if daemon else []), out=True, err=True)
    try:
        line = c.readline(120)
        if not line or not line.startswith("ready "):
            raise SystemExit(f"{argv}: tree did not start ({line!r}) {c.drain_err()!r}")
        pids = [int(p) for p in line.split()[1:]]
        fds = pidfds_for(pids)
        if len(fds) != len(pids):
            raise SystemExit(f"{argv}: part of the tree was gone before the stop")
        poller = select.poll()
        waiting = {}
        for fd in fds.values():
            poller.register(fd, select.POLLIN)
            waiting[fd] = True
        poller.register(c.pidfd, select.POLLIN)
        t0 = time.monotonic_ns()
        os.kill(c.pid, signal.SIGTERM)
        wrapper_done = None
        cpu = None
        last = t0
        hard_end = t0 + 30e9
        while True:
            now = time.monotonic_ns()
            if wrapper_done is not None and (not waiting or now >= wrapper_done + linger * 1e9):
                break
            if now >= hard_end:
                break
            limit = (wrapper_done + linger * 1e9) if wrapper_done is not None else hard_end
            for fd, _ in poller.poll(max(0, (limit - now) / 1e6)):
                t = time.monotonic_ns()
                poller.unregister(fd)
                if fd == c.pidfd:
                    wrapper_done = t
                    # Exited, not yet waited for: a zombie still shows its time on the CPU.
                    cpu = wrapper_cpu_ns(c.pid)
                else:
                    waiting.pop(fd, None)
                    last = max(last, t)
        left = len(waiting)
        elapsed = None if left or wrapper_done is None else max(wrapper_done, last) - t0
        for fd in list(waiting):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        c.wait(10)
        verdict = None
        err = c.drain_err()
        for ln in err.splitlines():
            if ln.startswith("{"):
                try:
                    verdict = json.loads(ln)
                except ValueError:
                    pass
        for fd in fds.values():
            os.close(fd)
        return elapsed, left, verdict, cpu
    finally:
        c.end(signal.SIGKILL)
        reap_orphans()


def w_tree_stop(ws, helper, n, reps):
    """6. The n-process tree, and the same plus a setsid() daemon grandchild."""
    out = {}
    for daemon in (False, True):
        res = {w.name: [] for w in ws}
        for i in range(reps):
            for w in rotated(ws, i):
                res[w.name].append(stop_once(w.group, helper, n, daemon))
        for name, runs in res.items():
            done = [r[0] for r in runs if r[0] is not None]
            lefts = [r[1] for r in runs]
            bad = [r[2] for r in runs if r[2] is not None and not r[2].get("stopped")]
            out[(name, daemon)] = (median(done) if len(done) == len(runs) else None, max(lefts), len(done), len(runs), bad)
    return out


def w_cost_curve(ws, vloer, helper, sizes, reps, bystanders):
    """7. vloer-run's stop for growing trees, interleaved with `tini -s -g` on the same trees
    when tini is there, and a 10-process tree with bystanders elsewhere."""
    out = {}
    argv = [vloer, "--"]
    tini = next((w for w in ws if w.name == "tini"), None)
    for n, k in zip(sizes, reps):
        runs, truns = [], []
        for i in range(k):
            runs.append(stop_once(argv, helper, n, False))
            if tini:
                truns.append(stop_once(tini.group, helper, n, False))
        out[n] = summarize_vloer(runs)
        done = [r[0] for r in truns if r[0] is not None]
        out[("tini", n)] = (median(done) if truns and len(done) == len(truns) else None,
                            max((r[1] for r in truns), default=None))
    # The bystanders' row compares with 10-process stops made just before they start: the
    # 10-process row above was measured before the large trees, and drifts from here by more
    # than any effect of the bystanders.
    out["alone"] = summarize_vloer([stop_once(argv, helper, 10, False) for _ in range(reps[0])])
    idle = Child([helper, "idle", str(bystanders)], out=True)
    try:
        if idle.readline(120) != "ready":
            raise SystemExit("bystanders did not start")
        runs = [stop_once(argv, helper, 10, False) for _ in range(reps[0])]
        out["bystanders"] = summarize_vloer(runs)
    finally:
        idle.end(signal.SIGTERM, timeout=30)
        reap_orphans()
    return out


def summarize_vloer(runs):
    done = [r[0] for r in runs if r[0] is not None]
    verdicts = [r[2] for r in runs]
    cpus = [r[3] for r in runs if r[3] is not None]
    ok = all(v is not None and v.get("stopped") is True for v in verdicts)
    ems = [v["elapsed_ms"] for v in verdicts if v]
    return (median(done) if len(done) == len(runs) else None, max(r[1] for r in runs), ok, median(ems),
            median(cpus) if cpus else None)


# ----------------------------------------------------------------------------------------------
# The table


def fmt(v, unit, digits=2):
    if v is None:
        return "—"
    return f"{v:.{digits}f} {unit}".strip()


def ratio(v, base):
    if v is None or base in (None, 0):
        return ""
    return f" ({v / base:.2f}×)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vloer", required=True, help="the vloer-run binary")
    ap.add_argument("--helper", required=True, help="the vloer-bench-helper binary")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and a 2 s idle window (for development; not for the table)")
    ap.add_argument("--only", default="1234567", help="workloads to run, e.g. 15 (default: all)")
    a = ap.parse_args()
    vloer = os.path.abspath(a.vloer)
    helper = os.path.abspath(a.helper)
    quick = a.quick
    only = set(a.only)

    if libc_prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        log("warning: could not become a child subreaper; orphans go to init")
    ws, missing = find_wrappers(vloer)
    names = [w.name for w in ws]
    has_tini = "tini" in names
    started = time.monotonic()
    R = {"load": open("/proc/loadavg").read().split()[0]}

    if "1" in only:
        runs = 30 if quick else 300
        log(f"1 start-up: {runs} interleaved runs of each")
        R["startup"] = w_startup(ws, vloer, runs)
        R["startup_runs"] = runs
    if "2" in only:
        reps = 1 if quick else 7
        log(f"2 zombie storm: 5000 orphans, {reps} runs as PID 1 of each")
        R["storm"] = w_storm(ws, helper, 5000, reps)
        R["storm_reps"] = reps
    if "3" in only or "4" in only:
        secs = 2.0 if quick else 10.0
        log(f"3/4 idle and memory: {secs:.0f} s around sleep, all wrappers at once")
        R["idle"], R["hwm"] = w_idle_and_memory(ws, secs)
        R["idle_secs"] = secs
        R["hwm_end"] = {"true": end_of_run_hwm(vloer, helper, False), "tree": end_of_run_hwm(vloer, helper, True)}
    if "5" in only:
        rounds = 50 if quick else 200
        log(f"5 signal latency: {rounds} interleaved rounds")
        R["latency"] = w_latency(ws, helper, rounds)
        R["latency_rounds"] = rounds
    if "6" in only:
        reps = 3 if quick else 21
        log(f"6 stopping a 200-process tree (and + a setsid daemon): {reps} interleaved runs each")
        R["stop"] = w_tree_stop(ws, helper, 200, reps)
        R["stop_reps"] = reps
    if "7" in only:
        sizes = [10, 100, 1000, 5000]
        reps = [3, 3, 2, 1] if quick else [9, 9, 5, 3]
        log(f"7 cost curve: trees of {sizes}, then 10 with 5000 bystanders")
        R["curve"] = w_cost_curve(ws, vloer, helper, sizes, reps, 5000)
        R["curve_reps"] = reps
    elapsed = time.monotonic() - started
    print_table(R, ws, missing, vloer, elapsed, quick)


def libc_prctl(option, arg):
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


def print_table(R, ws, missing, vloer, elapsed, quick):
    names = [w.name for w in ws]
    base = "tini" if "tini" in names else None
    rows = []

    def row(label, vals, unit, target="", holds="", digits=2, scale=1.0, ratios=True):
        b = vals.get(base) if base else None
        cells = []
        for n in names:
            v = vals.get(n)
            v = None if v is None else v / scale
            bb = None if b is None else b / scale
            cells.append(fmt(v, unit, digits) + (ratio(v, bb) if ratios and n != base else ""))
        rows.append((label, cells, target, holds))

    def yes(cond):
        return "—" if cond is None else ("yes" if cond else "**no**")

    if "startup" in R:
        s = R["startup"]
        v, t = s.get("vloer-run"), s.get("tini")
        row(f"1 start-up `W -- true`, median of {R['startup_runs']} (bare `true`: {s['bare true'] / MS:.2f} ms)",
            s, "ms", "≤ 1.2× tini", yes(None if t is None else v <= 1.2 * t), scale=MS)
        voff = s.get("vloer-run --verdict off")
        rows.append((f"1 `vloer-run --verdict off -- true` vs `tini -s -- true`",
                     [fmt(voff / MS, "ms") + ratio(voff, t)] + [""] * (len(names) - 1),
                     "≤ 1.5× tini", yes(None if t is None else voff <= 1.5 * t)))
    if "storm" in R:
        storm, why = R["storm"]
        if storm is None:
            rows.append(("2 zombie storm", ["skipped: " + why] + [""] * (len(names) - 1), "", ""))
        else:
            t = {k: v[0] for k, v in storm.items()}
            z = {k: v[1] for k, v in storm.items()}
            vt, bt = t.get("vloer-run"), t.get("tini")
            row(f"2 zombie storm, 5000 orphans, as PID 1: until none remains, median of {R['storm_reps']}",
                t, "ms", "≤ tini", yes(None if bt is None else vt <= bt), scale=MS)
            row("2 zombie storm: most zombies outstanding at a sample", z, "", "", "", digits=0, ratios=False)
    if "idle" in R:
        row(f"3 idle wake-ups/s around `sleep` ({R['idle_secs']:.0f} s, voluntary_ctxt_switches)", R["idle"], "/s",
            "0", yes(R["idle"].get("vloer-run") == 0), digits=1, ratios=False)
    if "hwm" in R:
        h = R["hwm"]
        vh, th = h.get("vloer-run"), h.get("tini")
        hd = {k: v for k, v in h.items()}
        end = R.get("hwm_end", {})
        peak = max([v for v in [vh, end.get("true"), end.get("tree")] if v is not None], default=None)
        row("4 peak RSS (VmHWM) of the wrapper around `sleep`", hd, "KiB", "", "", digits=0)
        rows.append((f"4 vloer-run's VmHWM at the very end of a run: `-- true` / after stopping a 200-process tree",
                     [f"{fmt(end.get('true'), 'KiB', 0)} / {fmt(end.get('tree'), 'KiB', 0)}"] + [""] * (len(names) - 1),
                     "≤ tini + 1024 KiB", yes(None if th is None or peak is None else peak <= th + 1024)))
        sizes = {w.name: os.path.getsize(w.path) / 1024 for w in ws}
        row("4 binary size", sizes, "KiB", "", "", digits=0)
    if "latency" in R:
        l = R["latency"]
        vl, tl = l.get("vloer-run"), l.get("tini")
        row(f"5 SIGUSR1 to the wrapper → child's handler, median of {R['latency_rounds']}", l, "µs",
            "≤ 1.5× tini", yes(None if tl is None else vl <= 1.5 * tl), digits=0, scale=US)
    if "stop" in R:
        st = R["stop"]
        for daemon in (False, True):
            what = "200-process tree" + (" + setsid() daemon" if daemon else "")
            times = {n: st[(n, daemon)][0] for n in names}
            left = {n: st[(n, daemon)][1] for n in names}
            vt = times.get("vloer-run")
            row(f"6 stop {what} on SIGTERM: until wrapper gone and tree gone, median of {R['stop_reps']}", times, "ms",
                "≤ 20 ms", yes(vt is not None and vt <= 20 * MS), scale=MS)
            unproven = len(st[("vloer-run", daemon)][4]) if ("vloer-run", daemon) in st else 0
            row(f"6 stop {what}: processes left behind (max)" + (f"; vloer-run verdicts not `stopped:true`: {unproven}" if unproven else ""),
                left, "", "0", yes(left.get("vloer-run") == 0 and not unproven), digits=0, ratios=False)
    if "curve" in R:
        cv = R["curve"]
        reps = R["curve_reps"]
        for n, k in zip([10, 100, 1000, 5000], reps):
            e, left, ok, ems, cpu = cv[n]
            te, tleft = cv.get(("tini", n), (None, None))
            cells = [fmt(None if e is None else e / MS, "ms") + ratio(e, te) + ("" if ok and left == 0 else " **not proven**")]
            cells += [(fmt(None if te is None else te / MS, "ms") + ("" if not tleft else f", {tleft} left") + " (`-g`)")
                      if nm == "tini" else "" for nm in names[1:]]
            big = n >= 1000
            rows.append((f"7 stop, {n}-process tree, median of {k} (vloer-run's verdict elapsed_ms {fmt(ems, '', 0)}; its own CPU {fmt(None if cpu is None else cpu / MS, 'ms', 1)})",
                         cells, "≤ 1.5× tini -g" if big else "",
                         yes(None if e is None or te is None else e <= 1.5 * te) if big else ""))
        alone, _, _, _, alone_cpu = cv["alone"]
        e, left, ok, ems, cpu = cv["bystanders"]
        rows.append((f"7 vloer-run stop, 10-process tree with 5000 bystanders, median of {reps[0]} (verdict elapsed_ms {fmt(ems, '', 0)}; its own CPU {fmt(None if cpu is None else cpu / MS, 'ms', 1)}; just before they started: {fmt(None if alone is None else alone / MS, 'ms')}, its own CPU {fmt(None if alone_cpu is None else alone_cpu / MS, 'ms', 1)})",
                     [fmt(None if e is None else e / MS, "ms") + ratio(e, alone) + ("" if ok and left == 0 else " **not proven**")] + [""] * (len(names) - 1),
                     "≤ 1.5× the 10-tree just before", yes(None if e is None or alone is None else e <= 1.5 * alone)))

    head = "| workload | " + " | ".join(names) + " | target | holds |"
    sep = "| --- | " + " | ".join("---:" for _ in names) + " | --- | --- |"
    print(head)
    print(sep)
    for label, cells, target, holds in rows:
        print(f"| {label} | " + " | ".join(cells) + f" | {target} | {holds} |")
    print()
    print(f"Ratios in parentheses are to tini (7: to tini -g; the bystanders: to the 10-process stops just before them). {datetime.date.today().isoformat()}, "
          f"{os.cpu_count()} CPUs, Linux {platform.release()}, load average before: {R['load']}; "
          f"took {elapsed:.0f} s{' (--quick: not for publishing)' if quick else ''}.")
    print()
    for w in ws:
        print(f"- {w.name}: {w.flags}")
    if missing:
        print(f"- not on PATH, left out: {', '.join(missing)}")
    print("- 1: each run is posix_spawn → waitpid of the whole command; rounds rotate the order.")
    print("- 2: `unshare --pid --fork --mount-proc W -- helper storm 5000`; the helper (the wrapper's child) orphans 5000 "
          "grandchildren blocked on one pipe, closes it, and samples /proc and their pidfds every 0.5 ms until PID 1 has reaped them all.")
    print("- 3/4: all wrappers around `sleep` at the same time; VmHWM read at the end of the idle window (start-up peak; "
          "tini, dumb-init and catatonit do no more work at exit than reaping). vloer-run's end-of-run peak: its verdict goes to a "
          "full pipe on stdout, so the final write blocks and VmHWM is read after the stop, the confirmation and the JSON; "
          "the target compares the highest of vloer-run's figures with tini's.")
    print("- 5: the child's SIGUSR1 handler writes its CLOCK_MONOTONIC time; latency = that − the time just before kill().")
    print("- 6/7: time from SIGTERM to the wrapper until it exited and every tree process had exited (pidfds); "
          "'left behind' = still alive 0.3 s after the wrapper exited (then killed by pidfd).")


if __name__ == "__main__":
    main()
