#!/usr/bin/env python3
"""Control-socket costs (issue 3), as ratios measured in one run:

  1. `status` round trip vs a bare connect-and-close on the same socket (median of N, interleaved);
  2. `vloer-run exec -- true` vs `vloer-run -- true` started afresh (median of M, interleaved).

Usage: benches/control.py [PATH-TO-vloer-run]   (default: target/release/vloer-run)
Installs nothing; starts one instance around `sleep`, stops it at the end, by pid.
"""
import os, socket, statistics, subprocess, sys, tempfile, time

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/vloer-run")
N, M = 2000, 200


def median_us(xs):
    return statistics.median(xs) * 1e6


def main():
    tmp = tempfile.mkdtemp(prefix="vloer-bench-")
    sock = os.path.join(tmp, "ctl")
    inst = subprocess.Popen([BIN, "--verdict", "off", "--control", sock, "--", "sleep", "100000"])
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            if time.monotonic() > deadline:
                sys.exit("instance did not create its socket")
            time.sleep(0.01)
        bare, status, wake = [], [], []

        def round_trip(request):
            t = time.perf_counter()
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sock)
            s.sendall(request)
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
            s.close()
            return time.perf_counter() - t, reply

        for _ in range(N):
            t = time.perf_counter()
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sock)
            s.close()
            bare.append(time.perf_counter() - t)
            took, reply = round_trip(b'{"op":"status"}\n')
            status.append(took)
            assert b'"pid"' in reply, reply
            # An unknown op: the server wakes, parses and answers, but reads nothing from /proc.
            took, reply = round_trip(b'{"op":"none"}\n')
            wake.append(took)
            assert b'unknown_op' in reply, reply
        fresh, inside = [], []
        for _ in range(M):
            t = time.perf_counter()
            subprocess.run([BIN, "--verdict", "off", "--", "true"], check=True)
            fresh.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run([BIN, "exec", "--control", sock, "--", "true"], check=True)
            inside.append(time.perf_counter() - t)
        rows = [
            ("connect + close (floor)", median_us(bare), None),
            ("error reply (server woken, no /proc)", median_us(wake), median_us(wake) / median_us(bare)),
            ("`status` round trip", median_us(status), median_us(status) / median_us(bare)),
            ("`vloer-run -- true` afresh (floor)", median_us(fresh), None),
            ("`vloer-run exec -- true`", median_us(inside), median_us(inside) / median_us(fresh)),
        ]
        print(f"| control socket ({N} / {M} interleaved runs) | median µs | ratio to its floor | target |")
        print("| --- | ---: | ---: | ---: |")
        for name, us, ratio in rows:
            target = "≤ 2.00×" if ratio is not None and name.startswith("`") else ""
            r = "" if ratio is None else f"{ratio:.2f}×"
            print(f"| {name} | {us:.0f} | {r} | {target} |")
    finally:
        subprocess.run([BIN, "stop", "--control", sock], stdout=subprocess.DEVNULL)
        try:
            inst.wait(timeout=30)
        except subprocess.TimeoutExpired:
            inst.kill()
            inst.wait()
        if os.path.exists(sock):
            os.unlink(sock)
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
