#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# torture.py: one seeded run of the model-based torture test (DESIGN.md,
# "Invariants of the data"; issue 15 part 3) against one raid1 or raid10
# device of a vblkd that tests/torture/test-torture.sh runs: random steps
# (writes, failures, stop/start, stale snapshots put back, spares, re-adds,
# reconfigurations, SIGKILL, hotplug), each followed by the checks of
# torture_model.py. Exits 0, or 1 printing the seed and the last steps.
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torture_io import BLOCK, MiB, Failure, Harness, Runner, StepLog, copy_direct  # noqa: E402
from torture_loops import Loops  # noqa: E402
from torture_model import Comp, Image, Model, Writers  # noqa: E402

# Odd sizes, so that the spare rule and the own-node trap of the policy
# (exact sizes) match only this test's loop devices on a shared host; the
# spare rule's size differs from one torture process to another too, or
# two runs at once would each take the other's blank disks as spares.
LEG_SIZE = 20 * MiB + 100 * 1024
POLICY_SPARE_SIZE = 21 * MiB + 44 * 1024 + (os.getpid() % 256) * 4096
# a disk of another size that takes a detached leg's loop number
PLACEHOLDER_SIZE = 8 * MiB

# step kind -> weight; TORTURE_SKIP names kinds (and check kinds) to leave out
WEIGHTS = {
    "write": 24, "fail": 7, "fail-last": 2, "stop": 5, "start": 30, "kill": 4, "term": 2,
    "snap-take": 4, "snap-restore": 4, "spare-add": 5, "spare-remove": 4, "re-add": 7,
    "reconfigure": 5, "reconfigure-last": 1, "hot-remove": 5, "hot-return": 8, "policy-spare": 3,
    "udev-change": 3, "claim": 3, "speed": 4, "settle": 6, "idle": 2,
}
CLAIMS = ["claim-own-node", "claim-own-link", "claim-fifo", "claim-dir", "claim-devnull",
          "claim-missing", "claim-own-leg", "claim-create-own-node"]
# checks that can be left out the same way
CHECKS = ["reads", "legs", "stopped-states", "own-node-trap", "scrub", "failed-stays"]
# variants of steps that can be left out: hot-reuse: another disk taking a
# detached leg's loop number; hot-gone-race: a start right after a stopped
# device's leg is unplugged (while its node is still on its way out) or
# comes back elsewhere (before the policy recorded where);
# failed-carry: a failed leg carried across a stop, a restart of vblkd, a
# reconfiguration or a change of spares (left out: those wait until no slot
# is failed); takeover-race: the next step while a spare is taking a failed
# slot (left out: the takeover is waited for); fail-syncing: a leg failed
# while a leg is being rebuilt (left out: legs fail only when all are in sync)
VARIANTS = ["hot-reuse", "hot-gone-race", "failed-carry", "takeover-race", "fail-syncing"]
CARRY = {"stop", "kill", "term", "reconfigure", "reconfigure-last", "spare-add", "spare-remove",
         "snap-restore", "policy-spare"}


class Config:
    def __init__(self, args, rng):
        self.name = args.name
        self.kind = args.kind
        self.bitmap = args.bitmap
        self.legs = args.legs
        self.skip = set(args.skip.replace(",", " ").split())
        # KIND=WEIGHT,... : more (or less) of some step kinds
        self.weights = dict(WEIGHTS)
        for item in args.weights.replace(",", " ").split():
            kind, _, w = item.partition("=")
            if kind not in WEIGHTS or not w.isdigit():
                raise SystemExit("torture.py: bad weight '%s' (KIND=N, KIND one of %s)" % (item, " ".join(WEIGHTS)))
            self.weights[kind] = int(w)
        unknown = self.skip - set(WEIGHTS) - set(CLAIMS) - set(CHECKS) - set(VARIANTS)
        if unknown:
            raise SystemExit("torture.py: unknown step or check kind in skip: %s" % " ".join(sorted(unknown)))
        if self.kind == "raid1":
            self.n = rng.choice([2, 2, 3])
            self.copies, self.chunk = self.n, BLOCK
        else:
            self.n = rng.choice([2, 3, 4])
            self.copies = 3 if self.n >= 3 and rng.random() < 0.25 else 2
            self.chunk = rng.choice([4096, 16384, 65536])
        self.bitmap_chunk = rng.choice(["64K", "256K", "1M"])
        self.speed = rng.choice(["0", "0", "1M", "4M"])

    def text(self):
        extra = " copies=%d chunk=%d" % (self.copies, self.chunk) if self.kind == "raid10" else ""
        return "%s bitmap=%s(%s) legs=%s x%d%s speed=%s" % (
            self.kind, self.bitmap, self.bitmap_chunk, self.legs, self.n, extra, self.speed)


class Torture:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.rng = random.Random(self.seed)
        self.data_rng = random.Random(self.seed * 7919 + 1)
        self.cfg = Config(args, self.rng)
        self.dir = args.dir
        os.makedirs(self.dir, exist_ok=True)
        self.log = StepLog(os.path.join(self.dir, "steps.log"))
        self.run = Runner(args.vbmgr, self.log)
        self.harness = Harness(args.req, args.rep)
        self.loops = Loops(self.run, os.path.join(self.dir, "loops"))
        self.m = Model(self.cfg, self.run, self.log, self.seed, args.dev_dir,
                       args.state_dir, args.vblkd)
        self.images = []
        self.snaps = []
        self.n_img = 0
        self.step = 0
        self.kind = "setup"
        self.speed = self.cfg.speed
        self.trap = os.path.join(args.policy_dir, "60-torture-trap.rules")
        self.rules = os.path.join(args.policy_dir, "50-torture.rules")

    def skipped(self, what):
        return what in self.cfg.skip

    # --- images and loop devices ---------------------------------------------

    def new_image(self, size=LEG_SIZE, policy_blank=False, prefix=None):
        self.n_img += 1
        prefix = prefix or ("p" if policy_blank else "i")
        img = Image(os.path.join(self.dir, "%s%02d.img" % (prefix, self.n_img)), size, policy_blank)
        img.placeholder = prefix == "h"
        with open(img.path, "wb") as f:
            f.truncate(size)
        self.images.append(img)
        return img

    def attach(self, img):
        img.loop = self.loops.attach(img.path)
        return img.loop

    def detach(self, img, then=None):
        self.loops.detach(img.loop, then)
        img.loop = None

    def src(self, img):
        return img.loop or img.path

    def source(self, comp):
        """The path vblkd names COMP by now (the policy moves it when a
        detached leg comes back elsewhere)."""
        for o in self.m.observe()["components"]:
            if o["uuid"] == comp.uuid:
                comp.source = o["source"]
        return comp.source

    def pool(self):
        """Images out of the device that can join it: fresh, or used before
        (an old superblock of this device on them)."""
        return [i for i in self.images if i.comp is None and not i.policy_blank and not i.placeholder
                and (self.cfg.legs == "file" or i.loop)]

    def joining_image(self):
        used = self.pool()
        if used and self.rng.random() < 0.4:
            return self.rng.choice(used)
        # one size for every leg: raid1's size follows its smallest leg
        img = self.new_image(LEG_SIZE)
        if self.cfg.legs == "loop":
            self.attach(img)
        return img

    # --- the run -------------------------------------------------------------

    def setup(self):
        m, cfg = self.m, self.cfg
        # the device's components are assembled (a returning one re-added)
        # wherever they appear; blank loop devices of one odd size become
        # its spares
        with open(self.rules, "w") as f:
            f.write("[rule torture-components]\nmatch.metadata=vblk\nmatch.device=%s\naction=assemble\n"
                    "start-degraded-after=3s\n\n"
                    "[rule torture-spares]\nmatch.DEVNAME=/dev/loop*\nmatch.metadata=none\nmatch.size==%d\n"
                    "action=spare\ndevices=%s\n" % (m.name, POLICY_SPARE_SIZE, m.name))
        self.run.vb("policy", "reload")
        legs = [self.new_image() for _ in range(cfg.n)]
        if cfg.legs == "loop":
            for img in legs:
                self.attach(img)
        attrs = ["--attr", "bitmap=%s" % cfg.bitmap, "--attr", "sync_speed_max=%s" % cfg.speed]
        if cfg.bitmap == "internal":
            attrs += ["--attr", "bitmap_chunk=%s" % cfg.bitmap_chunk]
        if cfg.kind == "raid10":
            attrs += ["--attr", "copies=%d" % cfg.copies, "--attr", "chunk_size=%d" % cfg.chunk]
        self.run.vb("create", m.name, "--driver", cfg.kind, "--backend", self.args.backend, *attrs,
                    "--start", *[self.src(i) for i in legs])
        for k, img in enumerate(legs):
            m.comps.append(Comp(img, "slot", k))
        m.started = True
        show = m.check_state()
        m.size = int(show["size"])
        m.data = bytearray(m.size)
        if not self.skipped("own-node-trap"):
            # vblk's own node is never a blank disk (defect C): a rule that
            # would take a blank disk of exactly its size as a spare
            with open(self.trap, "w") as f:
                f.write("[rule torture-own-node-trap]\nmatch.DEVNAME=/dev/loop*\nmatch.metadata=none\n"
                        "match.size==%d\naction=spare\ndevices=%s\n" % (m.size, m.name))
            self.run.vb("policy", "reload")
        self.log.line("run: seed=%d %s size=%d" % (self.seed, cfg.text(), m.size))
        self.settle_now("initial sync")

    def teardown(self):
        m = self.m
        self.run.vb("delete", m.name, timeout=60)
        for rules in (self.trap, self.rules):
            if os.path.exists(rules):
                os.unlink(rules)
        self.run.vb("policy", "reload")
        self.loops.close()
        for img in self.images:
            if img.loop:
                self.loops.remove_now(img.loop)
            os.unlink(img.path)
        for s in self.snaps:
            os.unlink(s["path"])

    def main(self):
        deadline = time.monotonic() + self.args.duration
        try:
            self.setup()
            while time.monotonic() < deadline and (self.args.steps == 0 or self.step < self.args.steps):
                self.step += 1
                for c in self.m.comps:
                    c.fresh = False
                kind = self.kind = self.choose()
                self.m.after_restart = self.m.after_restart and kind not in ("settle",)
                text = getattr(self, "do_" + kind.replace("-", "_"))()
                self.log.line("%4d %-13s %s | %s" % (self.step, kind, text, self.m.summary()))
                self.check()
            self.step += 1
            self.kind = "final"
            if not self.m.started:
                self.do_start()
            self.settle_now("final")
            self.log.line("%4d %-13s | %s" % (self.step, "final", self.m.summary()))
            st = self.m.stats
            print("torture: seed %d passed: %d steps, %d state checks, %d node reads, %d leg checks, "
                  "%d writes" % (self.seed, self.step, st["checks"], st["reads"], st["leg_checks"], st["writes"]),
                  flush=True)
            self.teardown()
            return 0
        except Failure as e:
            self.report("%s" % e)
            return 1
        except Exception:
            self.report("harness error:\n" + traceback.format_exc())
            return 2

    def report(self, why):
        out = sys.stderr
        print("", file=out)
        print("TORTURE FAILED: seed %d (%s), step %d (%s): %s"
              % (self.seed, self.cfg.text(), self.step, self.kind, why), file=out)
        print("model: %s" % self.m.summary(), file=out)
        print("last steps:", file=out)
        self.log.dump(out)
        w = self.args.weights.replace(" ", ",")
        print("replay: TORTURE_RUNS='%d:%s:%s:%s%s'%s bash tests/torture/test-torture.sh"
              % (self.seed, self.cfg.kind, self.cfg.bitmap, self.cfg.legs, ":" + w if w else "",
                 " TORTURE_SKIP='%s'" % " ".join(sorted(self.cfg.skip)) if self.cfg.skip else ""),
              file=out)
        self.dump_stacks(out)
        out.flush()

    def dump_stacks(self, out):
        """Where every thread of a live vblkd is (a failure that is vblkd
        stuck, rather than wrong, shows there)."""
        pid = getattr(self.harness, "pid", None)
        if not pid or not shutil.which("gdb"):
            return
        try:
            os.kill(pid, 0)
            r = subprocess.run(["gdb", "-batch", "-p", str(pid), "-ex", "thread apply all bt"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            print("(no stacks of vblkd: %s)" % e, file=out)
            return
        print("vblkd's threads (pid %d):" % pid, file=out)
        for line in r.stdout.splitlines():
            if line.startswith(("Thread ", "#")):
                print("  " + line, file=out)

    def choose(self):
        kinds, weights = [], []
        carry = self.skipped("failed-carry") and any(c.st == "failed" for c in self.m.slots())
        for kind, w in self.cfg.weights.items():
            if self.skipped(kind) or w == 0 or (carry and kind in CARRY):
                continue
            if getattr(self, "can_" + kind.replace("-", "_"))():
                kinds.append(kind)
                weights.append(w)
        return self.rng.choices(kinds, weights)[0]

    def check(self, timeout=15):
        if self.harness.pid is not None and not self.harness.alive():
            raise Failure("vblkd (pid %d) died" % self.harness.pid)
        self.m.check_state(timeout)
        self.m.check_reads()

    def settle_now(self, why):
        m = self.m
        if not m.started:
            return
        self.run.vb("set", m.name, "sync_speed_max=0")
        self.wait_jobs()
        m.check_state()
        self.spare_not_idle(why)
        behind = [c.img.name() for c in m.slots() if c.st == "syncing"]
        if behind:
            raise Failure("%s: every job ended, but %s still not in sync" % (why, ", ".join(behind)))
        m.check_reads()
        m.check_legs()
        m.after_restart = False
        text = "jobs ended, in-sync legs equal the model"
        # (a scrub compares copies: a device with a single slot has none)
        if not self.skipped("scrub") and self.rng.random() < 0.3 and m.n_slots() > 1:
            for _ in range(5):
                # a job may start between the wait and the check (a spare
                # taking a slot): Busy, wait for it too
                rc, _, err = self.run.vb("check", m.name, expect=None)
                if rc == 0 or "Busy" not in err:
                    break
                self.wait_jobs()
            if rc != 0:
                raise Failure("%s: vbmgr check: exit status %d: %s" % (why, rc, err.strip()))
            self.wait_jobs()
            jobs = [j for j in self.run.vb_json("jobs", "--json")
                    if j.get("device") == m.name and j.get("operation") == "check"]
            if not jobs or jobs[-1].get("mismatches") != 0 or jobs[-1].get("state") != "finished":
                raise Failure("%s: vbmgr check: %s" % (why, jobs[-1] if jobs else "no check job"))
            text += ", check: 0 mismatches"
        if self.speed != "0":
            self.run.vb("set", m.name, "sync_speed_max=%s" % self.speed)
        return text

    def spare_not_idle(self, why):
        """A spare is never left beside a failed slot once the jobs ended
        (it takes the slot when the leg fails: not after a rebuild onto the
        failed leg ran to its end, as a takeover asked for while an earlier
        one's thread was still there once waited)."""
        m = self.m
        deadline = time.monotonic() + 10
        while m.spares() and any(c.st == "failed" for c in m.slots()):
            if time.monotonic() > deadline:
                raise Failure("%s: spare %s left beside failed %s" % (
                    why, ", ".join(c.img.name() for c in m.spares()),
                    ", ".join(c.img.name() for c in m.slots() if c.st == "failed")))
            time.sleep(0.2)
            self.wait_jobs()
            m.check_state()

    def wait_jobs(self):
        """vbmgr wait until no job runs (a job cancelled because its leg
        failed, another following it, is no failure to vbmgr wait); a
        device left degraded or failed is the model's to judge."""
        for _ in range(5):
            rc, _, err = self.run.vb("wait", self.m.name, "--timeout", "120", timeout=150, expect=None)
            if rc == 0 or (rc == 1 and "no job runs, and the device is" in err):
                return
            if rc != 1 or "cancelled" not in err:
                raise Failure("vbmgr wait %s: exit status %d: %s" % (self.m.name, rc, err.strip()))
            self.log.note("wait: %s" % err.strip())
        raise Failure("vbmgr wait %s: jobs cancelled again and again" % self.m.name)

    def under_writes(self, p=0.4):
        return self.m.started and self.rng.random() < p

    # --- steps: preconditions (can_*) and actions (do_*) -----------------------

    def can_write(self):
        return self.m.started

    def do_write(self):
        m = self.m
        nblocks = m.size // BLOCK
        extents = []
        for _ in range(self.rng.randint(1, 6)):
            n = self.rng.randint(1, 16)
            if self.rng.random() < 0.3:
                b = self.rng.randrange(256)  # a hot spot: overwrites
            else:
                b = self.rng.randrange(nblocks - n)
            extents.append((b, n))
        m.write(self.data_rng, self.step, extents)
        return "%d extents, %d blocks" % (len(extents), sum(n for _, n in extents))

    def losable(self, states=("in-sync", "syncing")):
        return [c for c in self.m.slots() if c.st in states and self.m.can_lose(c)]

    def failable(self):
        if self.skipped("fail-syncing") and any(c.st == "syncing" for c in self.m.slots()):
            return []
        return self.losable()

    def can_fail(self):
        return self.m.started and bool(self.failable())

    def await_takeover(self):
        """With 'takeover-race' left out: until a spare took the failed slot
        (or 10 s: vblkd may leave it to a re-add)."""
        m = self.m
        deadline = time.monotonic() + 10
        while (self.skipped("takeover-race") and m.spares() and any(c.st == "failed" for c in m.slots())
               and time.monotonic() < deadline):
            time.sleep(0.2)
            m.check_state()

    def do_fail(self):
        c = self.rng.choice(self.failable())
        if self.under_writes():
            with Writers(self.m, self.step, self.rng) as w:
                self.run.vb("fail", self.m.name, self.source(c))
                w.stop()
            extra = " under %d writes" % w.count
        else:
            self.run.vb("fail", self.m.name, self.source(c))
            extra = ""
        c.st, c.why, c.may_return = "failed", "admin", False
        self.await_takeover()
        return "%s%s" % (c.img.name(), extra)

    def last_copies(self):
        return [c for c in self.m.slots() if c.st == "in-sync" and not self.m.can_lose(c)]

    def can_fail_last(self):
        return self.m.started and bool(self.last_copies())

    def do_fail_last(self):
        c = self.rng.choice(self.last_copies())
        rc, _, err = self.run.vb("fail", self.m.name, self.source(c), expect=None)
        if rc == 0 and self.m.n_slots() > 1:
            # a rebuild the model had not seen end yet may have made another
            # copy whole just before: then the leg is not the last copy; the
            # look takes the rebuild's end in (and any copy left without a
            # readable leg fails the reads that follow)
            c.st, c.why, c.may_return = "failed", "admin", False
            self.m.check_state()
            if not [o for o in self.m.slots() if o.st == "in-sync"]:
                raise Failure("vbmgr fail of the last copy %s was accepted" % c.img.name())
            self.await_takeover()
            return "%s (a rebuild had just ended)" % c.img.name()
        # a single slot left: nothing to fail over to (NotSupported)
        want = "NotSupported" if self.m.n_slots() == 1 else "WouldLoseData"
        if want not in err:
            raise Failure("vbmgr fail of the last copy %s: %s (expected %s)" % (c.img.name(), err.strip(), want))
        return "%s refused: %s" % (c.img.name(), want)

    def can_stop(self):
        return self.m.started

    def do_stop(self):
        self.run.vb("stop", self.m.name, timeout=60)
        self.m.started = False
        return ""

    def can_start(self):
        return not self.m.started

    def do_start(self):
        m = self.m
        for c in m.slots():
            if self.cfg.legs == "loop" and c.img.loop is None and c.st != "failed":
                c.st, c.why, c.may_return = "failed", "missing", True
        self.failed_may_return()
        if self.skipped("hot-gone-race"):
            # the nodes of unplugged legs gone first (see VARIANTS)
            deadline = time.monotonic() + 10
            while self.loops.held() and time.monotonic() < deadline:
                time.sleep(0.05)
        self.run.vb("start", m.name, timeout=60)
        m.started = True
        # the link is there when start returns (a method that makes a block
        # node returns once it exists), not some time later (defect F)
        link = os.path.join(self.args.dev_dir, m.name)
        if not os.path.islink(link):
            raise Failure("vbmgr start returned, and %s is missing (defect F)" % link)
        return ""

    def failed_may_return(self):
        """(The check 'failed-stays' left out: torture_model lets a failed
        leg come back at any time.)"""

    def can_kill(self):
        return True

    def do_kill(self):
        return self.restart("kill")

    def can_term(self):
        return True

    def do_term(self):
        return self.restart("term")

    def restart(self, how):
        m = self.m
        extra = ""
        if how == "kill" and self.under_writes(0.5):
            with Writers(m, self.step, self.rng, expect_errors=True) as w:
                time.sleep(self.rng.random() * 0.3)
                self.harness.kill()
                w.stop()
            cut = len(m.amb)
            extra = " under %d writes (%d blocks in doubt)" % (w.count, cut)
        elif how == "kill":
            self.harness.kill()
        else:
            self.harness.term()
        self.failed_may_return()
        # a leg that went away stays re-addable: its slot's table says
        # missing (or still faulty, when vblkd was killed before it recorded
        # that), and a new vblkd re-adds it when it comes back
        self.harness.start()
        m.after_restart = True
        for c in m.slots():
            if self.cfg.legs == "loop" and c.img.loop is None and c.st != "failed" and m.started:
                c.st, c.why, c.may_return = "failed", "missing", True
        # (the device comes back on its own: autostart, or the policy's
        # assemble once its components are seen, degraded after 3 s)
        self.check(timeout=40)
        return "vblkd pid %d%s" % (self.harness.pid, extra)

    def can_snap_take(self):
        return any(c.uuid for c in self.m.slots())

    def do_snap_take(self):
        c = self.rng.choice([c for c in self.m.slots() if c.uuid])
        path = os.path.join(self.dir, "snap-%s-%d.img" % (c.img.name(), self.step))
        copy_direct(c.img.path, path, c.img.size, create=True)
        self.snaps.append({"path": path, "img": c.img, "uuid": c.uuid, "step": self.step})
        if len(self.snaps) > 3:
            os.unlink(self.snaps.pop(0)["path"])
        return "%s (%s, device %s)" % (c.img.name(), c.st, "up" if self.m.started else "down")

    def restorable(self):
        out = []
        for s in self.snaps:
            c = s["img"].comp
            if (c is not None and c.kind == "slot" and c.uuid == s["uuid"]
                    and (c.st == "failed" or self.m.can_lose(c))):
                out.append(s)
        return out

    def can_snap_restore(self):
        return bool(self.restorable())

    def do_snap_restore(self):
        m = self.m
        s = self.rng.choice(self.restorable())
        c = s["img"].comp
        if m.started:
            self.do_stop()
            self.check()
        dst = c.img.loop or c.img.path
        copy_direct(s["path"], dst, c.img.size)
        if c.st != "failed":
            c.st = "syncing"  # stale: brought up to date, never read
        self.do_start()
        return "%s from step %d (%s)" % (c.img.name(), s["step"], c.st)

    def can_spare_add(self):
        return len(self.m.spares()) < 2

    def do_spare_add(self):
        m = self.m
        img = self.joining_image()
        was_used = img.used
        rc, _, err = self.run.vb("add", m.name, self.src(img), "--spare", expect=None)
        if rc == 1 and was_used:
            return "%s (used before) refused: %s" % (img.name(), err.strip()[:120])
        if rc != 0:
            raise Failure("vbmgr add --spare %s: exit status %d: %s" % (img.name(), rc, err.strip()))
        nc = Comp(img, "spare", st="spare")
        nc.fresh = True  # the policy may have taken a blank disk just before
        m.comps.append(nc)
        return "%s%s" % (img.name(), " (used before)" if was_used else "")

    def removable(self):
        return [c for c in self.m.comps if c.kind in ("spare", "replaced")]

    def can_spare_remove(self):
        return bool(self.removable())

    def do_spare_remove(self):
        c = self.rng.choice(self.removable())
        was = c.kind
        rc, _, err = self.run.vb("remove", self.m.name, self.source(c), expect=None)
        # (a spare may take a failed slot first, the takeover racing this
        # step: the removal is refused then, and the spare holds the slot)
        if rc != 0 and was == "spare" and "holds slot" in err:
            self.m.check_state()
            if c.kind == "slot":
                return "%s refused: it took slot %d first" % (c.img.name(), c.slot)
        if rc != 0:
            raise Failure("vbmgr remove %s (%s): exit status %d: %s" % (c.img.name(), was, rc, err.strip()))
        self.forget(c)
        # its superblock is erased: a disk of the spare rule's size is blank
        # again, and the policy takes it at its next look (a restart's look
        # of every disk; seed 2583291398, step 15)
        if c.img.policy_blank and c.img.loop:
            self.m.pending_policy.add(c.img)
        return "%s (%s)" % (c.img.name(), c.kind)

    def forget(self, c):
        self.m.comps.remove(c)
        c.img.comp = None

    def readdable(self):
        # (a leg back at another number is named by its new path: vblkd
        # finds it by the superblock the policy saw there)
        return [c for c in self.m.slots() if c.st == "failed"
                and (self.cfg.legs == "file" or c.img.loop)]

    def readd_path(self, c):
        return self.source(c) if self.cfg.legs == "file" else c.img.loop

    def can_re_add(self):
        return self.m.started and bool(self.readdable())

    def do_re_add(self):
        c = self.rng.choice(self.readdable())
        # (with 'failed-stays' left out, the leg may have come back on its
        # own since the last look: "not faulty" then)
        # (a spare may take its slot first: the re-add is refused then, and
        # the leg is the replaced one)
        expect = None
        if self.under_writes():
            with Writers(self.m, self.step, self.rng) as w:
                rc, _, err = self.run.vb("add", self.m.name, self.readd_path(c), expect=expect)
                w.stop()
            extra = " under %d writes" % w.count
        else:
            rc, _, err = self.run.vb("add", self.m.name, self.readd_path(c), expect=expect)
            extra = ""
        # (or a blank disk the policy passed over, a spare at a restart's
        # look of every disk once the device has none)
        if rc != 0 and "replaced in its slot" in err and (self.m.spares() or self.m.pending_policy):
            self.m.check_state()
            if c.kind == "replaced":
                return "%s refused: a spare took its slot first" % c.img.name()
        if rc != 0 and ("not faulty" not in err or not self.skipped("failed-stays")):
            raise Failure("vbmgr add %s (re-add): exit status %d: %s" % (c.img.name(), rc, err.strip()))
        if rc != 0:
            extra += " (back already)"
        c.st, c.why, c.may_return = "syncing", None, False
        return "%s%s" % (c.img.name(), extra)

    def can_reconfigure(self):
        return self.m.kind == "raid1" and self.m.started

    def do_reconfigure(self):
        m = self.m
        args, text = [], []
        slots = m.slots()
        insync = [c for c in slots if c.st == "in-sync"]
        # (not a failed leg while there is a spare: the spare may be taking
        # its slot right now, and then it is not a slot to remove)
        removable = [c for c in slots if (c.st != "in-sync" or len(insync) > 1)
                     and not (c.st == "failed" and m.spares())]
        add = len(slots) < 2 or (len(slots) < 4 and self.rng.random() < 0.6)
        remove = (not add or self.rng.random() < 0.3) and len(slots) > 1 and removable
        gone = None
        if remove:
            gone = self.rng.choice(removable)
            args += ["--remove", self.source(gone)]
            text.append("-%s(%s)" % (gone.img.name(), gone.st))
        new = None
        if add or not remove:
            new = self.joining_image()
            args += ["--add", self.src(new)]
            text.append("+%s%s" % (new.name(), "(used)" if new.used else ""))
        if self.under_writes():
            with Writers(m, self.step, self.rng) as w:
                self.run.vb("reconfigure", m.name, *args, timeout=60)
                w.stop()
            text.append("under %d writes" % w.count)
        else:
            self.run.vb("reconfigure", m.name, *args, timeout=60)
        if gone is not None:
            self.forget(gone)
            # its superblock is erased (it no longer describes the device):
            # a disk of the spare rule's size is blank again, for the policy
            if gone.img.policy_blank and gone.img.loop:
                m.pending_policy.add(gone.img)
        if new is not None:
            m.comps.append(Comp(new, "slot", max([c.slot for c in m.slots()] + [-1]) + 1, "syncing"))
        return " ".join(text)

    def can_reconfigure_last(self):
        return self.m.kind == "raid1" and self.m.started and len(
            [c for c in self.m.slots() if c.st == "in-sync"]) == 1 and self.m.n_slots() > 1

    def do_reconfigure_last(self):
        c = [c for c in self.m.slots() if c.st == "in-sync"][0]
        _, _, err = self.run.vb("reconfigure", self.m.name, "--remove", self.source(c), expect=1, timeout=60)
        if "WouldLoseData" not in err:
            raise Failure("reconfigure --remove of the last in-sync leg: %s" % err.strip())
        return "-%s refused: WouldLoseData" % c.img.name()

    def hot_removable(self):
        if self.cfg.legs != "loop":
            return []
        return [c for c in self.losable(("in-sync", "syncing")) + [
            c for c in self.m.slots() if c.st == "failed"] if c.img.loop]

    def can_hot_remove(self):
        return bool(self.hot_removable())

    def do_hot_remove(self):
        m = self.m
        c = self.rng.choice(self.hot_removable())
        loop = c.img.loop
        # another disk may take the number (a path vblkd still names for
        # this leg): a blank one of another size, or one the spare rule takes
        then, extra = None, ""
        r = self.rng.random()
        if self.skipped("hot-reuse"):
            pass
        elif r < 0.25:
            then = self.new_image(PLACEHOLDER_SIZE, prefix="h")
            extra = ", %s takes its number" % then.name()
        elif r < 0.4 and not self.skipped("policy-spare"):
            then = self.new_image(POLICY_SPARE_SIZE, policy_blank=True)
            m.pending_policy.add(then)
            extra = ", blank %s takes its number" % then.name()
        if self.under_writes():
            with Writers(m, self.step, self.rng) as w:
                self.detach(c.img, then)
                time.sleep(1.5)
                w.stop()
            extra += " under %d writes" % w.count
        else:
            self.detach(c.img, then)
        if not m.started and self.skipped("hot-gone-race"):
            deadline = time.monotonic() + 10
            while os.path.exists(loop) and time.monotonic() < deadline:
                time.sleep(0.05)
        if c.st == "failed":
            # it went away and comes back: the policy may re-add it, unless
            # the administrator failed it (that lasts until a re-add)
            c.may_return = c.why != "admin"
        elif m.started:
            c.st, c.why, c.may_return = "failed", "hotplug", True
            self.await_takeover()
        return "%s (%s)%s" % (c.img.name(), loop, extra)

    def can_hot_return(self):
        return self.cfg.legs == "loop" and any(c.img.loop is None for c in self.m.comps)

    def do_hot_return(self):
        m = self.m
        c = self.rng.choice([c for c in m.comps if c.img.loop is None])
        loop = self.attach(c.img)
        self.run.sh("udevadm", "settle", "--timeout=10", check=False)
        if not m.started and self.skipped("hot-gone-race") and c.uuid:
            # until the policy recorded where the leg is now: a start at once
            # would not find it (the race is the variant's)
            deadline = time.monotonic() + 10
            while self.source(c) != loop and time.monotonic() < deadline:
                time.sleep(0.1)
        if c.kind == "slot" and c.st == "failed" and m.started and c.why in ("hotplug", "missing"):
            # the rule re-adds it — unless a spare took its slot first (a
            # start with two legs missing and two spares: the second
            # takeover may come after the model's last look; seed
            # 2087922013's variant, step 52)
            c.st, c.why, c.may_return = "syncing", None, False
            c.came_back = True
        return "%s as %s" % (c.img.name(), loop)

    def can_policy_spare(self):
        return self.cfg.legs == "loop" and len(self.m.pending_policy) < 2

    def do_policy_spare(self):
        m = self.m
        img = self.new_image(POLICY_SPARE_SIZE, policy_blank=True)
        m.pending_policy.add(img)
        self.attach(img)
        if not m.spares():
            deadline = time.monotonic() + 15
            while img.comp is None:
                if time.monotonic() > deadline:
                    raise Failure("the spare rule did not take the blank %s (%s) within 15 s"
                                  % (img.name(), img.loop))
                m.check_state()
                time.sleep(0.2)
            return "%s (%s) taken as a spare" % (img.name(), img.loop)
        return "%s (%s), the device has a spare already" % (img.name(), img.loop)

    def can_udev_change(self):
        return self.m.started or self.cfg.legs == "loop"

    def do_udev_change(self):
        nodes = [i.loop for i in self.images if i.loop and i.comp is not None]
        if self.m.started:
            nodes.append(self.m.node)
        if nodes:
            self.run.sh("udevadm", "trigger", "--action=change", *nodes)
            self.run.sh("udevadm", "settle", "--timeout=10", check=False)
            time.sleep(1.0)
        return "%d nodes" % len(nodes)

    def can_claim(self):
        return any(not self.skipped(c) for c in CLAIMS)

    def do_claim(self):
        m = self.m
        kinds = [k for k in CLAIMS if not self.skipped(k)]
        if not m.started:
            kinds = [k for k in kinds if k not in ("claim-own-node", "claim-own-link", "claim-create-own-node")] or \
                ["claim-dir"]
        kind = self.rng.choice(kinds)
        argv = ["add", m.name, None, "--spare"]
        if kind == "claim-own-node":
            argv[2] = m.node
        elif kind == "claim-own-link":
            argv[2] = os.path.join(self.args.dev_dir, m.name)
        elif kind == "claim-fifo":
            argv[2] = os.path.join(self.dir, "fifo")
            if not os.path.exists(argv[2]):
                os.mkfifo(argv[2])
        elif kind == "claim-dir":
            argv[2] = self.dir
        elif kind == "claim-devnull":
            argv[2] = "/dev/null"
        elif kind == "claim-missing":
            argv[2] = os.path.join(self.dir, "no-such-file")
        elif kind == "claim-own-leg":
            argv[2] = self.rng.choice(m.slots()).source
        else:
            blank = os.path.join(self.dir, "claim-blank.img")
            with open(blank, "wb") as f:
                f.truncate(LEG_SIZE)
            argv = ["create", m.name + "x", "--driver", "raid1", m.node, blank]
        rc, _, err = self.run.vb(*argv, expect=None, timeout=20)
        if rc == 0:
            if argv[0] == "create":
                self.run.vb("delete", m.name + "x", expect=None)
            raise Failure("%s: 'vbmgr %s' was accepted (defects B/C/D)" % (kind, " ".join(argv)))
        if rc != 1:
            raise Failure("%s: 'vbmgr %s': exit status %d: %s" % (kind, " ".join(argv), rc, err.strip()))
        return "%s refused: %s" % (kind, err.strip().split(": ", 2)[-1][:80])

    def can_speed(self):
        return True

    def do_speed(self):
        self.speed = self.rng.choice(["0", "512K", "2M", "8M"])
        self.run.vb("set", self.m.name, "sync_speed_max=%s" % self.speed)
        return "sync_speed_max=%s" % self.speed

    def can_idle(self):
        return self.m.started

    def do_idle(self):
        # long enough for the bitmap's sweeps (two idle 5 s rounds) to
        # clear what every copy has: a leg that comes back stale afterwards
        # cannot be resynced from the bitmap alone (defect A)
        t = self.rng.uniform(6, 12)
        time.sleep(t)
        return "%.1f s" % t

    def can_settle(self):
        return self.m.started

    def do_settle(self):
        return self.settle_now("settle")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--kind", choices=["raid1", "raid10"], required=True)
    p.add_argument("--bitmap", choices=["internal", "none"], required=True)
    p.add_argument("--legs", choices=["file", "loop"], required=True)
    p.add_argument("--duration", type=float, default=30)
    p.add_argument("--steps", type=int, default=0, help="end after this many steps (0: the duration only)")
    p.add_argument("--skip", default="")
    p.add_argument("--weights", default="")
    p.add_argument("--name", default="tor")
    p.add_argument("--backend", default="loop")
    p.add_argument("--dir", required=True)
    p.add_argument("--dev-dir", required=True)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--policy-dir", required=True)
    p.add_argument("--vbmgr", required=True)
    p.add_argument("--vblkd", required=True)
    p.add_argument("--req", required=True)
    p.add_argument("--rep", required=True)
    args = p.parse_args()

    def terminated(signum, frame):
        raise Failure("terminated by the harness (signal %d)" % signum)

    signal.signal(signal.SIGTERM, terminated)
    return Torture(args).main()


if __name__ == "__main__":
    sys.exit(main())
