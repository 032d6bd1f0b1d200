#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""An installer's use of vblkd (issue 19), as one would make it with plain
Gio over the system bus: Manager.Apply of a spec, following the apply's
Job through the ObjectManager's InterfacesAdded, PropertiesChanged and the
Job's Completed signal; Device.Start of a stacked device followed the same
way; a Cancel of a running apply. Prints one JSON object of what it saw.

  vb-installer.py apply SPEC [--dry-run] [--prune]
  vb-installer.py start NAME
  vb-installer.py cancel-apply SPEC    (cancels the apply's job once it appears)
"""
import json
import sys

from gi.repository import Gio, GLib

NAME = "org.vblk.VBlk1"
ROOT = "/org/vblk/VBlk1"
JOB = "org.vblk.VBlk1.Job"


class Watcher:
    """The jobs of one operation: progress seen, final properties, Completed."""

    def __init__(self, bus, operation, on_job=None):
        self.bus = bus
        self.operation = operation
        self.on_job = on_job
        self.jobs = {}  # path -> {"progress": [...], "state": ..., "completed": ...}
        bus.signal_subscribe(NAME, "org.freedesktop.DBus.ObjectManager", "InterfacesAdded", ROOT,
                             None, Gio.DBusSignalFlags.NONE, self.added)
        bus.signal_subscribe(NAME, "org.freedesktop.DBus.Properties", "PropertiesChanged", None,
                             JOB, Gio.DBusSignalFlags.NONE, self.changed)
        bus.signal_subscribe(NAME, JOB, "Completed", None, None, Gio.DBusSignalFlags.NONE,
                             self.completed)

    def added(self, conn, sender, path, iface, signal, params):
        obj, ifaces = params.unpack()
        props = ifaces.get(JOB)
        if props is None or props.get("Operation") != self.operation:
            return
        self.jobs[obj] = {"objects": props.get("Objects"), "cancelable": props.get("Cancelable"),
                          "progress": [props.get("Progress")], "bytes": props.get("Bytes"),
                          "state": props.get("State"), "completed": None}
        if self.on_job:
            self.on_job(obj)

    def changed(self, conn, sender, path, iface, signal, params):
        job = self.jobs.get(path)
        if job is None:
            return
        _, changed, _ = params.unpack()
        if "Progress" in changed:
            job["progress"].append(changed["Progress"])
        if "State" in changed:
            job["state"] = changed["State"]
        if "StartedByUID" in changed:
            job["started_by"] = changed["StartedByUID"]

    def completed(self, conn, sender, path, iface, signal, params):
        job = self.jobs.get(path)
        if job is not None:
            job["completed"] = list(params.unpack())

    def all_completed(self):
        return all(j["completed"] is not None for j in self.jobs.values())


def call(bus, path, iface, method, args, out_type, done):
    bus.call(NAME, path, iface, method, args, GLib.VariantType(out_type),
             Gio.DBusCallFlags.NONE, 600000, None, done)


def run(bus, operation, path, iface, method, args, out_type, on_job=None):
    """Calls @method, follows its jobs until the call returned and every job
    completed (or 30 s passed), and returns what it saw."""
    loop = GLib.MainLoop()
    result = {}
    watcher = Watcher(bus, operation, on_job)

    def done(conn, res):
        try:
            reply = conn.call_finish(res).unpack()
            result["reply"] = reply[0] if reply else None
        except GLib.Error as e:
            result["error"] = Gio.DBusError.get_remote_error(e)
            result["message"] = e.message
        check()

    def check():
        if ("reply" in result or "error" in result) and watcher.all_completed():
            loop.quit()
        return GLib.SOURCE_REMOVE

    def tick():
        check()
        return GLib.SOURCE_CONTINUE

    GLib.timeout_add(100, tick)
    GLib.timeout_add_seconds(30, loop.quit)
    call(bus, path, iface, method, args, out_type, done)
    loop.run()
    result["jobs"] = watcher.jobs
    return result


def main(argv):
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    what = argv[1]
    if what in ("apply", "cancel-apply"):
        spec = open(argv[2]).read()
        options = {"dry-run": GLib.Variant("b", "--dry-run" in argv),
                   "prune": GLib.Variant("b", "--prune" in argv)}
        on_job = None
        if what == "cancel-apply":
            def on_job(path):
                bus.call_sync(NAME, path, JOB, "Cancel", GLib.Variant("(a{sv})", ({},)), None,
                              Gio.DBusCallFlags.NONE, -1, None)
                print("cancel-sent", file=sys.stderr, flush=True)
        result = run(bus, "apply", ROOT + "/Manager", "org.vblk.VBlk1.Manager", "Apply",
                     GLib.Variant("(sa{sv})", (spec, options)), "(s)", on_job)
        if "reply" in result:
            result["plan"] = json.loads(result.pop("reply"))
    elif what == "start":
        path = ROOT + "/devices/" + argv[2]
        result = run(bus, "start", path, "org.vblk.VBlk1.Device", "Start",
                     GLib.Variant("(a{sv})", ({},)), "()")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
