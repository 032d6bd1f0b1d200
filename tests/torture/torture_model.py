# SPDX-License-Identifier: LGPL-2.1-or-later
# torture_model.py: the reference model of one raid1/raid10 device — what
# every block of its node must read back, which image holds which slot and
# in what state — and the checks of vblkd against it: the node's reads, the
# in-sync legs' data areas, `vbmgr show --json`, the stable link.
import json
import os
import random
import subprocess
import threading
import time

from torture_io import (BLOCK, DATA_OFFSET, MiB, TAG, TAG_MAGIC, AlignedBuffer, Failure,
                        describe_block, pread_direct)

# node reads are checked in regions of this size, each read several times
# in a row: the engine balances reads round-robin, one request at a time
REGION = 64 * 1024


class Image:
    """An image file: a leg, a spare, or one waiting in the pool. In loop
    mode it is used through a loop device (`loop`, None while detached)."""

    def __init__(self, path, size, policy_blank=False):
        self.path = path
        self.size = size
        self.loop = None
        self.used = False  # carries a superblock from an earlier membership
        self.comp = None
        self.policy_blank = policy_blank  # of the size the spare rule takes
        self.placeholder = False  # a disk that takes a detached leg's number

    def name(self):
        return os.path.basename(self.path).rsplit(".", 1)[0]


class Comp:
    """A component of the device, as the model wants it.
    kind: slot | spare | replaced (a failed slot a spare took: role 'faulty')
    st:   in-sync | syncing (being brought up to date) | failed | spare | faulty
    why:  for a failed slot: admin (vbmgr fail), hotplug (detached while
          running), missing (absent at a start)."""

    def __init__(self, img, kind, slot=None, st="in-sync"):
        self.img = img
        self.kind = kind
        self.slot = slot
        self.st = st
        self.why = None
        self.uuid = None
        self.source = img.loop or img.path  # the path vblkd knows it by
        # a hotplug-failed or missing leg that came back: vblkd may re-add it
        self.may_return = False
        self.came_back = False
        self.fresh = False  # added by this step (a spare-add)
        img.comp = self
        img.used = True

    def label(self):
        if self.kind == "slot":
            tag = {"in-sync": "ok", "syncing": "sync", "failed": "FAIL:" + (self.why or "?")}[self.st]
            return "%s=%s:%s" % (self.slot, self.img.name(), tag)
        return "%s:%s" % (self.img.name(), "spare" if self.kind == "spare" else "replaced")


class Model:
    def __init__(self, cfg, runner, log, seed, dev_dir, state_dir, vblkd):
        self.cfg = cfg
        self.name = cfg.name
        self.kind = cfg.kind
        self.run = runner
        self.log = log
        self.seed = seed
        self.dev_dir = dev_dir
        self.state_dir = state_dir
        self.vblkd = vblkd
        self.comps = []
        self.started = False
        self.size = 0
        self.data = None
        self.amb = {}  # block -> possible contents (a write cut by a kill)
        self.node = None
        self.copies = cfg.copies
        self.chunk = cfg.chunk
        self.seq = 0
        self.lock = threading.Lock()
        self.after_restart = False
        self.skip_checks = cfg.skip
        self.stats = {"reads": 0, "checks": 0, "leg_checks": 0, "writes": 0}
        # blank disks of the spare rule's size attached and not taken yet
        self.pending_policy = set()

    # --- geometry -----------------------------------------------------------

    def slots(self):
        return sorted((c for c in self.comps if c.kind == "slot"), key=lambda c: c.slot)

    def n_slots(self):
        return len(self.slots())

    def groups(self):
        """The sets of slots that hold the same data."""
        n = self.n_slots()
        if self.kind == "raid1":
            return [set(range(n))]
        out = []
        for c in range(n):
            g = {(c * self.copies + j) % n for j in range(self.copies)}
            if g not in out:
                out.append(g)
        return out

    def by_slot(self):
        return {c.slot: c for c in self.comps if c.kind == "slot"}

    def can_lose(self, comp):
        """Whether COMP's slot can go (fail, detach, be overwritten) with
        every byte still on another in-sync slot."""
        slots = self.by_slot()
        # (a leg unplugged while the device is stopped is missing at the start)
        def whole(c):
            return c.st == "in-sync" and (self.cfg.legs == "file" or c.img.loop is not None)
        for g in self.groups():
            if comp.slot in g and not any(s != comp.slot and whole(slots[s]) for s in g):
                return False
        return True

    def leg_copies(self, offset):
        """(slot, offset in the data area) of every copy of device OFFSET."""
        if self.kind == "raid1":
            return [(c.slot, offset) for c in self.slots()]
        n = self.n_slots()
        chunk, within = divmod(offset, self.chunk)
        out = []
        for j in range(self.copies):
            s = chunk * self.copies + j
            out.append((s % n, (s // n) * self.chunk + within))
        return out

    def read_repeats(self):
        return self.n_slots() if self.kind == "raid1" else self.copies

    # --- data -----------------------------------------------------------------

    def make_blocks(self, rng, step, block, count):
        out = bytearray()
        for b in range(block, block + count):
            with self.lock:
                self.seq += 1
                seq = self.seq
            out += TAG.pack(TAG_MAGIC, self.seed & 0xFFFFFFFF, step, b, seq)
            out += rng.randbytes(BLOCK - TAG.size)
        return bytes(out)

    def landed(self, block, data):
        with self.lock:
            self.data[block * BLOCK:block * BLOCK + len(data)] = data
            for b in range(block, block + len(data) // BLOCK):
                self.amb.pop(b, None)
            self.stats["writes"] += 1

    def cut(self, block, data):
        """A write that may or may not have landed (vblkd killed under it):
        each of its blocks may read old or new, consistently."""
        with self.lock:
            for i in range(len(data) // BLOCK):
                b = block + i
                old = self.amb.get(b, [bytes(self.data[b * BLOCK:(b + 1) * BLOCK])])
                self.amb[b] = old + [data[i * BLOCK:(i + 1) * BLOCK]]

    def write(self, rng, step, extents):
        buf = AlignedBuffer(max(n for _, n in extents) * BLOCK)
        fd = os.open(self.node, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)
        try:
            for block, n in extents:
                data = self.make_blocks(rng, step, block, n)
                buf.view[:len(data)] = data
                try:
                    put = os.pwritev(fd, [buf.view[:len(data)]], block * BLOCK)
                except OSError as e:
                    raise Failure("write of %d blocks at block %d failed: %s" % (n, block, e))
                if put != len(data):
                    raise Failure("short write at block %d: %d of %d" % (block, put, len(data)))
                self.landed(block, data)
        finally:
            os.close(fd)
            buf.close()

    # --- what vblkd says ----------------------------------------------------

    def _state_json(self):
        """The desired state as vblkd loads it (state.json and its
        journal), read as vblkd --print-state reads it."""
        p = subprocess.run([self.vblkd, "--print-state", "--state-dir", self.state_dir],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise Failure("vblkd --print-state: %s" % p.stderr.strip())
        return p.stdout

    def observe(self):
        """`vbmgr show --json` with each component's UUID (from the desired
        state, whose component list show follows)."""
        for _ in range(50):
            s1 = self._state_json()
            show = self.run.vb_json("show", self.name, "--json")
            s2 = self._state_json()
            if s1 != s2:
                continue
            dev = [d for d in json.loads(s1)["devices"] if d["name"] == self.name]
            if not dev:
                raise Failure("device %s is not in state.json" % self.name)
            saved = dev[0]["components"]
            shown = show["components"]
            if [c["source"] for c in saved] != [c["source"] for c in shown]:
                time.sleep(0.05)
                continue
            for o, s in zip(shown, saved):
                o["uuid"] = s.get("uuid")
            return show
        raise Failure("vbmgr show and state.json never agreed on the components")

    def learn_uuids(self, show=None):
        """Components the model added: their UUID, found by where they are."""
        show = show or self.observe()
        known = {c.uuid for c in self.comps if c.uuid}
        for c in self.comps:
            if c.uuid:
                continue
            src = c.img.loop or c.img.path
            hits = [o for o in show["components"] if o["source"] == src and o["uuid"] not in known]
            if len(hits) == 1:
                c.uuid = hits[0]["uuid"]
                known.add(c.uuid)

    def _absorb(self, show):
        """What vblkd may do on its own, taken into the model: a rebuild
        ending, a spare taking a failed slot, a returning leg re-added by the
        policy, a blank disk taken as a spare by the policy."""
        running = show["state"] in ("active", "degraded")
        byuuid = {c.uuid: c for c in self.comps if c.uuid}
        obs = {o["uuid"]: o for o in show["components"]}
        for o in show["components"]:
            c = byuuid.get(o["uuid"])
            slot_role = o["role"].isdigit()
            if c is not None:
                c.source = o["source"]
            if c is None:
                img = self.policy_blank_at(o["source"])
                # a spare the policy added may have taken a failed slot
                # before this look (as any spare does at once)
                took = slot_role and o["state"] in ("rebuilding", "in-sync")
                # (one spare at most: the policy takes none while the device
                # has one, but a spare-add of this very step may have come
                # after the policy's; seed 2950652206 at 120 s, step 243)
                older = [v for v in self.spares() if not v.fresh]
                if img is not None and (o["role"] == "spare" or took) and not older:
                    nc = Comp(img, "spare", st="spare")
                    nc.uuid = o["uuid"]
                    self.comps.append(nc)
                    self.pending_policy.discard(img)
                    self.log.note("the policy took %s as a spare" % img.name())
                    if took:
                        self._takeover(nc, o, obs)
                continue
            if c.kind == "slot" and self.kind == "raid1" and slot_role:
                c.slot = int(o["role"])  # raid1 renumbers its slots on reconfigure
            if c.kind == "spare" and slot_role and o["state"] in ("rebuilding", "in-sync"):
                self._takeover(c, o, obs)
            if not running:
                continue
            if c.kind == "slot" and c.st == "syncing" and o["state"] == "in-sync":
                c.st = "in-sync"
            present = self.cfg.legs == "file" or c.img.loop is not None
            # with the check 'failed-stays' left out, a failed leg may come
            # back at any time (its data is still checked)
            may = c.may_return or "failed-stays" in self.skip_checks
            if (c.kind == "slot" and c.st == "failed" and may and present and slot_role
                    and o["state"] in ("rebuilding", "in-sync")):
                self.log.note("%s came back (re-added by vblkd)" % c.img.name())
                c.st, c.why, c.may_return = "syncing", None, False
                c.came_back = True
            if c.kind == "slot" and c.st == "syncing" and o["state"] == "in-sync":
                c.st = "in-sync"

    def _takeover(self, c, o, obs):
        """Spare C now holds a slot: allowed when it is a failed slot's,
        whose component became the replaced one."""
        for v in self.comps:
            # (a failed leg that came back on its own may be replaced all the same)
            if (v.kind == "slot" and (v.st == "failed" or (v.came_back and v.st == "syncing")) and v.uuid in obs
                    and obs[v.uuid]["role"] == "faulty"
                    and (self.kind == "raid1" or v.slot == int(o["role"]))):
                self.log.note("spare %s took slot %s of %s" % (c.img.name(), o["role"], v.img.name()))
                c.kind, c.slot, c.st = "slot", int(o["role"]), "syncing"
                v.kind, v.slot, v.st = "replaced", None, "faulty"
                return

    def spares(self):
        return [c for c in self.comps if c.kind == "spare"]

    def policy_blank_at(self, source):
        for img in self.pending_policy:
            if img.loop == source:
                return img
        return None

    def expected_state(self):
        if not self.started:
            return "stopped"
        return "active" if all(c.st == "in-sync" for c in self.slots()) else "degraded"

    def _compare(self, show):
        probs = []
        running = show["state"] in ("active", "degraded")
        want = self.expected_state()
        # a stopped device shows 'ready' once its configuration changed, or
        # 'configuring' while a component is missing
        if show["state"] != want and not (want == "stopped" and show["state"] in ("ready", "configuring")):
            probs.append("device state %s, the model says %s" % (show["state"], want))
        if running and self.size and int(show["size"]) != self.size:
            probs.append("size %s, the model's %d" % (show["size"], self.size))
        if running and self.size and show["block_device"]:
            try:
                fd = os.open(show["block_device"], os.O_RDONLY | os.O_CLOEXEC)
                try:
                    node_size = os.lseek(fd, 0, os.SEEK_END)
                finally:
                    os.close(fd)
                if node_size != self.size:
                    probs.append("the node %s has %d bytes, the model %d" % (show["block_device"], node_size, self.size))
            except OSError as e:
                probs.append("the node %s: %s" % (show["block_device"], e))
        byuuid = {c.uuid: c for c in self.comps if c.uuid}
        seen = set()
        slot_states = []
        for o in show["components"]:
            c = byuuid.get(o["uuid"])
            if c is None:
                what = "an unknown component"
                if o["source"] in (self.node, os.path.join(self.dev_dir, self.name)):
                    what = "its own block node (defects B/C)"
                probs.append("lists %s: %s role %s %s" % (what, o["source"], o["role"], o["state"]))
                continue
            seen.add(c.uuid)
            role, st, nm = o["role"], o["state"], c.img.name()
            if role.isdigit():
                slot_states.append(st)
            if c.kind == "slot":
                if not role.isdigit():
                    probs.append("%s: role %s, the model has it in slot %s" % (nm, role, c.slot))
                elif self.kind == "raid10" and int(role) != c.slot:
                    probs.append("%s: slot %s, the model has slot %s" % (nm, role, c.slot))
                if not running:
                    if self.started:
                        continue
                    # a stopped device: vblkd has not read its superblocks, but
                    # what it shows must not say a failed leg is fine
                    if c.st == "failed" and st not in ("faulty", "missing") and "stopped-states" not in self.skip_checks:
                        probs.append("%s: %s while stopped, but it failed (%s)" % (nm, st, c.why))
                    continue
                ok = {"in-sync": ("in-sync",) + (("rebuilding",) if self.after_restart else ()),
                      "syncing": ("rebuilding", "in-sync"),
                      "failed": ("faulty", "missing")}[c.st]
                if st not in ok:
                    if c.st == "failed":
                        probs.append("%s failed (%s) and is %s now: a failed leg came back without a re-add"
                                     % (nm, c.why, st))
                    else:
                        probs.append("%s: %s, the model says %s" % (nm, st, c.st))
            elif c.kind == "spare":
                if role != "spare" or st != "spare":
                    probs.append("%s: role %s %s, the model says spare" % (nm, role, st))
            else:
                if role != "faulty" or st not in ("faulty", "missing"):
                    probs.append("%s: role %s %s, the model says replaced (faulty)" % (nm, role, st))
        for c in self.comps:
            if c.uuid not in seen:
                probs.append("%s (%s) is no longer listed" % (c.img.name(), c.kind))
        if running:
            says = "active" if all(s == "in-sync" for s in slot_states) else "degraded"
            if show["state"] != says:
                probs.append("vblkd contradicts itself: state %s with slots %s" % (show["state"], slot_states))
        link = os.path.join(self.dev_dir, self.name)
        if running:
            if not os.path.islink(link):
                probs.append("no stable link %s while %s (defect F)" % (link, show["state"]))
            elif os.readlink(link) != show["block_device"]:
                probs.append("stable link %s -> %s, block device %s" % (link, os.readlink(link), show["block_device"]))
        elif os.path.lexists(link) and self.started is False:
            probs.append("stable link %s left while stopped" % link)
        return probs

    def check_state(self, timeout=15):
        """Poll until vblkd agrees with the model (what it does on its own
        takes a moment); the problems of the last look otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            show = self.observe()
            self.learn_uuids(show)
            self._absorb(show)
            probs = self._compare(show)
            if not probs:
                break
            if time.monotonic() > deadline:
                raise Failure("vblkd disagrees with the model:\n    " + "\n    ".join(probs)
                              + "\n    model: " + self.summary()
                              + "\n    vbmgr show: " + json.dumps(
                                  [show["state"]] + [[os.path.basename(o["source"]), o["role"], o["state"], o["errors"]]
                                                     for o in show["components"]]))
            time.sleep(0.2)
        self.node = show["block_device"] or None
        self.stats["checks"] += 1
        return show

    def summary(self):
        return "%s %s [%s]" % (self.name, "up" if self.started else "down",
                               " ".join(c.label() for c in sorted(
                                   self.comps, key=lambda c: (c.kind != "slot", c.slot or 0, c.img.path))))

    # --- the node's reads -------------------------------------------------------

    def check_reads(self):
        if not self.started or "reads" in self.skip_checks:
            return
        k = self.read_repeats()
        buf = AlignedBuffer(REGION)
        fd = os.open(self.node, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        try:
            for off in range(0, self.size, REGION):
                n = min(REGION, self.size - off)
                for r in range(k):
                    try:
                        got = os.preadv(fd, [buf.view[:n]], off)
                    except OSError as e:
                        raise Failure("read of %d bytes at %d of %s failed: %s" % (n, off, self.node, e))
                    if got != n:
                        raise Failure("short read at %d of %s" % (off, self.node))
                    self.stats["reads"] += 1
                    b = bytes(buf.view[:n])
                    if b != self.data[off:off + n]:
                        self._explain_read(off, b, r, k)
        finally:
            os.close(fd)
            buf.close()

    def _explain_read(self, off, got, r, k):
        for i in range(0, len(got), BLOCK):
            blk = (off + i) // BLOCK
            g = got[i:i + BLOCK]
            want = bytes(self.data[blk * BLOCK:(blk + 1) * BLOCK])
            if g == want:
                continue
            cands = self.amb.get(blk)
            if cands and g in cands:
                # the first read of a block a killed write may have reached
                # decides what it holds; every later read must agree
                self.data[blk * BLOCK:(blk + 1) * BLOCK] = g
                del self.amb[blk]
                continue
            legs = "; ".join(self.leg_views(blk))
            raise Failure("read %d/%d of block %d (byte %d) of %s: %s, the model holds %s%s\n    legs: %s"
                          % (r + 1, k, blk, blk * BLOCK, self.node, describe_block(g, self.seed),
                             describe_block(want, self.seed),
                             " (or what a write cut by the kill left)" if cands else "", legs))

    def leg_views(self, blk):
        out = []
        slots = self.by_slot()
        for s, lo in self.leg_copies(blk * BLOCK):
            c = slots.get(s)
            if c is None:
                continue
            try:
                d = pread_direct(c.img.path, DATA_OFFSET + lo, BLOCK)
                out.append("%s (slot %s, %s): %s" % (c.img.name(), s, c.st, describe_block(d, self.seed)))
            except OSError as e:
                out.append("%s: %s" % (c.img.name(), e))
        return out

    # --- the legs --------------------------------------------------------------

    def check_legs(self):
        """Every in-sync slot's data area holds the model's data (so the
        copies agree byte for byte); raid10 by copy, as the near layout
        places it. Called when no job runs."""
        if "legs" in self.skip_checks:
            return
        slots = self.by_slot()
        insync = {s: c for s, c in slots.items() if c.st == "in-sync"}
        if not insync:
            return
        span = self.component_span()
        areas = {}
        for s, c in insync.items():
            areas[s] = pread_direct(c.img.path, DATA_OFFSET, span)
        step = self.chunk if self.kind == "raid10" else REGION
        for off in range(0, self.size, step):
            n = min(step, self.size - off)
            want = self.data[off:off + n]
            for s, lo in self.leg_copies(off):
                if s not in insync:
                    continue
                got = areas[s][lo:lo + n]
                if got != want:
                    self._explain_leg(insync[s], s, off, lo, got, areas)
        self.stats["leg_checks"] += 1

    def component_span(self):
        if self.kind == "raid1":
            return self.size
        return -(-self.size * self.copies // self.n_slots() // self.chunk) * self.chunk

    def _explain_leg(self, comp, s, off, lo, got, areas):
        for i in range(0, len(got), BLOCK):
            blk = (off + i) // BLOCK
            g = got[i:i + BLOCK]
            want = bytes(self.data[blk * BLOCK:(blk + 1) * BLOCK])
            if g == want:
                continue
            cands = self.amb.get(blk)
            if cands and g in cands:
                # every in-sync copy must hold the same one of them
                others = [areas[t][l2 + i:l2 + i + BLOCK] for t, l2 in self.leg_copies(off) if t in areas]
                if all(o == g for o in others):
                    self.data[blk * BLOCK:(blk + 1) * BLOCK] = g
                    del self.amb[blk]
                    continue
            raise Failure("in-sync leg %s (slot %s) at block %d (data area byte %d): %s, the model holds %s\n    legs: %s"
                          % (comp.img.name(), s, blk, lo + i, describe_block(g, self.seed),
                             describe_block(want, self.seed), "; ".join(self.leg_views(blk))))


class BackgroundWriter(threading.Thread):
    """Writes to the node while a step acts (a failure, a detach, a swap, a
    kill): what it wrote goes to the model; a write in flight when vblkd is
    killed may have landed or not."""

    def __init__(self, model, step, seed, part, parts):
        super().__init__(daemon=True)
        self.model = model
        self.step = step
        self.rng = random.Random(seed)
        self.part, self.parts = part, parts
        self.halt = threading.Event()
        self.error = None
        self.inflight = None
        self.count = 0
        self.node = model.node

    def run(self):
        m = self.model
        nblocks = m.size // BLOCK
        buf = AlignedBuffer(16 * BLOCK)
        try:
            fd = os.open(self.node, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)
        except OSError as e:
            self.error = e
            return
        try:
            while not self.halt.is_set():
                # each writer its own 64 KiB stripes: no two race on a block
                region = self.rng.randrange(nblocks // 16)
                region -= region % self.parts
                region += self.part
                if region >= nblocks // 16:
                    continue
                b = region * 16 + self.rng.randrange(8)
                n = self.rng.randint(1, 8)
                data = m.make_blocks(self.rng, self.step, b, n)
                buf.view[:len(data)] = data
                self.inflight = (b, data)
                try:
                    put = os.pwritev(fd, [buf.view[:len(data)]], b * BLOCK)
                    if put != len(data):
                        raise OSError(5, "short write (%d of %d)" % (put, len(data)))
                except OSError as e:
                    self.error = e
                    return
                m.landed(b, data)
                self.inflight = None
                self.count += 1
                time.sleep(0.002)
        finally:
            os.close(fd)
            buf.close()


class Writers:
    """A few BackgroundWriters around a step: `with Writers(...) as w:`."""

    def __init__(self, model, step, rng, expect_errors=False, n=2):
        self.model = model
        self.expect_errors = expect_errors
        self.threads = [BackgroundWriter(model, step, rng.getrandbits(64), i, n) for i in range(n)]
        self.count = 0

    def __enter__(self):
        for t in self.threads:
            t.start()
        time.sleep(0.05)
        return self

    def stop(self):
        for t in self.threads:
            t.halt.set()
        for t in self.threads:
            t.join(30)
            if t.is_alive():
                raise Failure("a write to %s did not return within 30 s" % t.node)
            self.count += t.count
            if t.error is not None:
                if not self.expect_errors:
                    raise Failure("a write to %s under the step failed: %s" % (t.node, t.error))
                if t.inflight is not None:
                    self.model.cut(*t.inflight)
        self.threads = []

    def __exit__(self, typ, val, tb):
        if typ is None:
            self.stop()
        else:
            for t in self.threads:
                t.halt.set()
            for t in self.threads:
                t.join(10)
        return False
