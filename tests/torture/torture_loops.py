# SPDX-License-Identifier: LGPL-2.1-or-later
# torture_loops.py: the loop devices of the torture test's legs, numbered
# from a private range far above what `losetup -f` hands out, and removed
# (LOOP_CTL_REMOVE) once detached: a path vblkd still names for a detached
# leg then leads nowhere — or, when the test wants it, to a disk of its own
# attached at that number — never to another test's disk on a shared host.
import errno
import fcntl
import os
import threading
import time

from torture_io import Failure

LOOP_CTL_REMOVE = 0x4C81


class Loops:
    def __init__(self, run, record):
        self.run = run
        self.record = record  # every number created, for the harness's cleanup
        self.next = 400 + (os.getpid() % 400) * 16
        self.lock = threading.Lock()
        self.pending = {}  # number -> image to attach there once it is gone (or None)
        self.stop = threading.Event()
        self.reaper = threading.Thread(target=self._reap, daemon=True)
        self.reaper.start()

    def _created(self, n):
        with open(self.record, "a") as f:
            f.write("%d\n" % n)

    def attach(self, path, number=None):
        """Attach PATH at NUMBER, or at the next free number of the range.
        Numbers whose device exists (a host may keep hundreds of unused
        ones: CI's machine had loop0 to loop499) are passed over without
        counting as a try; 64 tries of losetup fail before it gives up."""
        tries = 0
        while tries < 64:
            with self.lock:
                n = number if number is not None else self.next
                if number is None:
                    self.next += 1
            if number is None and os.path.exists("/sys/block/loop%d" % n):
                if n >= (1 << 20) - 1:
                    break  # loop's minor numbers end there
                continue
            tries += 1
            self._created(n)
            rc, _, err = self.run.run(["losetup", "/dev/loop%d" % n, path], timeout=30)
            if rc == 0:
                return "/dev/loop%d" % n
            if number is not None:
                return None
        raise Failure("no free loop device number for %s" % path)

    def detach(self, loop, then=None):
        """losetup -d LOOP (only marked for detach while vblkd holds it
        open); once it is gone its number is removed, or THEN (an image)
        attached there."""
        self.run.sh("losetup", "-d", loop)
        with self.lock:
            self.pending[int(loop[len("/dev/loop"):])] = then

    def _remove(self, n):
        fd = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.ioctl(fd, LOOP_CTL_REMOVE, n)
            return True
        except OSError as e:
            return e.errno in (errno.ENODEV, errno.ENXIO)
        finally:
            os.close(fd)

    def _reap(self):
        while not self.stop.is_set():
            with self.lock:
                items = list(self.pending.items())
            for n, then in items:
                if os.path.exists("/sys/block/loop%d/loop/backing_file" % n):
                    continue  # still held (autoclear): vblkd has not let go yet
                if not self._remove(n):
                    continue
                with self.lock:
                    del self.pending[n]
                if then is not None:
                    then.loop = self.attach(then.path, n)
            time.sleep(0.05)

    def held(self):
        with self.lock:
            return dict(self.pending)

    def close(self):
        self.stop.set()
        self.reaper.join(5)

    def remove_now(self, loop):
        """Detach LOOP and remove its number (teardown)."""
        self.run.run(["losetup", "-d", loop], timeout=30)
        n = int(loop[len("/dev/loop"):])
        for _ in range(50):
            if self._remove(n):
                return
            time.sleep(0.1)
