#!/usr/bin/env python3
"""The least FUSE server a test needs, speaking /dev/fuse directly (standard library only).

hung_fuse.py MOUNTPOINT mounts a filesystem with one file, `f`, at MOUNTPOINT (as root), prints
`ready`, and answers requests until it is stopped. Attributes are never cached, so once the test
SIGSTOPs it, any stat(2) of `f` waits for it: a hung filesystem, as a FUSE or NFS server that
stopped answering leaves one.
"""

import ctypes
import errno
import os
import struct
import sys

LOOKUP, FORGET, GETATTR, OPEN, READ, RELEASE, FLUSH, INIT, BATCH_FORGET = 1, 2, 3, 14, 15, 18, 25, 26, 42
ROOT, FILE = 1, 2
DATA = b"hung\n"


def attr(node):
    # ino size blocks atime mtime ctime (u64), their nsecs, mode nlink uid gid rdev blksize flags
    mode, size = (0o40755, 0) if node == ROOT else (0o100644, len(DATA))
    return struct.pack("<QQQQQQIIIIIIIIII", node, size, 0, 0, 0, 0, 0, 0, 0, mode, 1, 0, 0, 0, 4096, 0)


def main():
    point = sys.argv[1]
    fd = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"hung_fuse", point.encode(), b"fuse", 0, opts) != 0:
        e = ctypes.get_errno()
        sys.exit(f"hung_fuse: mount: {os.strerror(e)}")
    print("ready", flush=True)
    while True:
        try:
            req = os.read(fd, 1 << 20)
        except OSError as e:
            if e.errno == errno.ENODEV:  # unmounted
                return
            raise
        length, op, unique, node = struct.unpack_from("<IIQQ", req)
        body = req[40:length]
        err, out = 0, b""
        if op in (FORGET, BATCH_FORGET):
            continue
        if op == INIT:
            major, minor = struct.unpack_from("<II", body)
            # major minor max_readahead flags max_background congestion max_write time_gran
            # max_pages map_alignment flags2 unused[7]
            out = struct.pack("<IIIIHHIIHHI7I", 7, min(minor, 31), 0, 0, 16, 12, 4096, 1, 1, 0, 0, *[0] * 7)
        elif op == GETATTR:
            out = struct.pack("<QII", 0, 0, 0) + attr(node)
        elif op == LOOKUP and node == ROOT and body.rstrip(b"\0") == b"f":
            out = struct.pack("<QQQQII", FILE, 0, 0, 0, 0, 0) + attr(FILE)
        elif op == LOOKUP:
            err = -errno.ENOENT
        elif op == OPEN:
            out = struct.pack("<QII", 0, 0, 0)
        elif op == READ:
            out = DATA
        elif op in (RELEASE, FLUSH):
            pass
        else:
            err = -errno.ENOSYS
        os.write(fd, struct.pack("<IiQ", 16 + len(out), err, unique) + out)


main()
