# SPDX-License-Identifier: LGPL-2.1-or-later
# torture_io.py: what the torture test's model and steps stand on — vbmgr
# calls under a timeout, O_DIRECT block I/O with aligned buffers, the
# channel to the bash harness (which owns vblkd's process), and the step log.
import collections
import errno
import json
import mmap
import os
import struct
import subprocess
import sys
import time

BLOCK = 4096
MiB = 1 << 20
# where the data starts on a component with metadata=vblk
DATA_OFFSET = 1 * MiB
# every written block starts with this tag, so that a wrong read says what
# it returned: which run, which step, which block, which write
TAG = struct.Struct("<4sIIIQ")
TAG_MAGIC = b"VBTT"


class Failure(Exception):
    """A broken invariant (or a hang): the run stops and says why."""


def describe_block(data, seed=None):
    """What a 4 KiB block holds, in words: zeros, one of our writes, or garbage."""
    if data.count(0) == len(data):
        return "zeros"
    if data[:4] == TAG_MAGIC:
        _, s, step, block, seq = TAG.unpack_from(data)
        other = "" if seed is None or s == (seed & 0xFFFFFFFF) else " (another run's!)"
        return "write #%d of step %d for block %d%s" % (seq, step, block, other)
    return "garbage %s..." % data[:8].hex()


class AlignedBuffer:
    """A page-aligned buffer for O_DIRECT transfers."""

    def __init__(self, size):
        self.size = size
        self.map = mmap.mmap(-1, max(size, BLOCK))
        self.view = memoryview(self.map)

    def close(self):
        self.view.release()
        self.map.close()


def pread_direct(path, offset, length, buf=None):
    """Read LENGTH bytes at OFFSET of PATH with O_DIRECT; returns bytes."""
    own = buf is None
    if own:
        buf = AlignedBuffer(length)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    try:
        done = 0
        while done < length:
            n = os.preadv(fd, [buf.view[done:length]], offset + done)
            if n <= 0:
                raise OSError(errno.EIO, "short read of %s at %d" % (path, offset + done))
            done += n
        return bytes(buf.view[:length])
    finally:
        os.close(fd)
        if own:
            buf.close()


def copy_direct(src, dst, length, src_offset=0, dst_offset=0, create=False):
    """Copy LENGTH bytes with O_DIRECT on both ends (an image file or a loop
    device): no page cache between the harness and vblkd's O_DIRECT I/O."""
    buf = AlignedBuffer(MiB)
    flags = os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    sfd = os.open(src, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    dfd = os.open(dst, flags, 0o644)
    try:
        done = 0
        while done < length:
            n = min(MiB, length - done)
            got = os.preadv(sfd, [buf.view[:n]], src_offset + done)
            if got != n:
                raise OSError(errno.EIO, "short read of %s" % src)
            put = os.pwritev(dfd, [buf.view[:n]], dst_offset + done)
            if put != n:
                raise OSError(errno.EIO, "short write of %s" % dst)
            done += n
        os.fsync(dfd)
    finally:
        os.close(sfd)
        os.close(dfd)
        buf.close()


class Runner:
    """Runs the programs the test drives, each under a timeout: a vbmgr call
    that does not return is a hung vblkd."""

    def __init__(self, vbmgr, log):
        self.vbmgr = vbmgr
        self.log = log
        self.env = dict(os.environ, G_DEBUG="fatal-criticals", LC_ALL="C")

    def run(self, argv, timeout=30, what=None):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                               env=self.env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise Failure("%s did not return within %d s (vblkd hangs?)"
                          % (what or " ".join(argv), timeout))
        return p.returncode, p.stdout, p.stderr

    def vb(self, *args, timeout=30, expect=0):
        """vbmgr ARGS; EXPECT is the exit status wanted (None: any). Returns
        (status, stdout, stderr)."""
        argv = [self.vbmgr] + [str(a) for a in args]
        rc, out, err = self.run(argv, timeout=timeout, what="vbmgr " + " ".join(args))
        if expect is not None and rc != expect:
            raise Failure("vbmgr %s: exit status %d, expected %d: %s"
                          % (" ".join(args), rc, expect, (err or out).strip()))
        return rc, out, err

    def vb_json(self, *args, timeout=30):
        _, out, _ = self.vb(*args, timeout=timeout)
        try:
            return json.loads(out)
        except ValueError:
            raise Failure("vbmgr %s: not JSON: %r" % (" ".join(args), out[:200]))

    def sh(self, *argv, timeout=30, check=True):
        rc, out, err = self.run([str(a) for a in argv], timeout=timeout)
        if check and rc != 0:
            raise Failure("%s: exit status %d: %s" % (" ".join(argv), rc, err.strip()))
        return out


class Harness:
    """The bash side (lib.sh) owns vblkd: it kills, stops and starts it on
    request, one line each way over two FIFOs."""

    def __init__(self, req, rep):
        self.req = open(req, "w", buffering=1)
        self.rep = open(rep, "r")
        self.pid = int(self.ask("pid"))

    def ask(self, what):
        try:
            self.req.write(what + "\n")
            self.req.flush()
            line = self.rep.readline()
        except OSError as e:
            raise Failure("harness: %s: %s" % (what, e))
        if not line.startswith("ok"):
            raise Failure("harness: %s: %s" % (what, line.strip() or "no answer (vblkd did not start?)"))
        return line[2:].strip()

    def kill(self):
        self.ask("kill")
        self.pid = None

    def term(self):
        self.ask("term")
        self.pid = None

    def start(self):
        self.pid = int(self.ask("start"))

    def alive(self):
        if self.pid is None:
            return False
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False


class StepLog:
    """One compact line per step; the last ones are printed on failure."""

    def __init__(self, path, keep=40):
        self.file = open(path, "a", buffering=1)
        self.last = collections.deque(maxlen=keep)
        self.t0 = time.monotonic()

    def line(self, text):
        text = "[%7.1fs] %s" % (time.monotonic() - self.t0, text)
        self.last.append(text)
        self.file.write(text + "\n")
        print(text, flush=True)

    def note(self, text):
        """Detail that goes to the log file and the failure dump, not stdout."""
        text = "           . %s" % text
        self.last.append(text)
        self.file.write(text + "\n")

    def dump(self, out=sys.stderr):
        for text in self.last:
            print(text, file=out)
