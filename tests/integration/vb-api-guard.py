#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The API guarded method by method (issue 22): reads the D-Bus interface
file, and calls every method it declares as the user this script runs as.
A method that changes anything must be refused with NotAuthorized, for
the polkit action DESIGN.md gives it (the refusal names it); a method
that only reads must answer. Every method must be classified in
CALLS below: a method added to the XML and not here fails the test until
someone decides which it is. Every property must be read-only.

  vb-api-guard.py XML FIXTURES.json [--interactive] [--only INTERFACE.METHOD]

FIXTURES: {"device": NAME of a stopped device, "started": NAME of a started
device, "raid1": NAME of a started raid1, "job": PATH of an ended job of
another user, "image": a spare image path, "component": NAME's component
index, "socket": a path for a unix socket, "wipe": a component of a
stopped device, with its superblock}. --interactive sets ALLOW_INTERACTIVE_AUTHORIZATION on every call
(there is no agent: polkit's challenge cannot be answered). --only makes
just that method's calls (the test's proof that a wrong answer is seen).
Prints one line per call and a count; exits 1 on any wrong answer.
"""
import json
import re
import sys

from gi.repository import Gio, GLib

NAME = "org.vblk.VBlk1"
ROOT = "/org/vblk/VBlk1"
PREFIX = NAME + "."
REFUSED = "org.vblk.VBlk1.Error.NotAuthorized"


def v(fmt, *values):
    return GLib.Variant(fmt, tuple(values))


def calls(fx, dumped):
    """For each Interface.Method, the calls to make: (kind, object path,
    arguments), kind "change" (must be refused) or "read" (must answer).
    The arguments are ones that would succeed if the caller were allowed,
    so that a refusal comes from polkit and not from a check of them."""
    dev = f"{ROOT}/devices/{fx['device']}"
    started = f"{ROOT}/devices/{fx['started']}"
    raid1 = f"{ROOT}/devices/{fx['raid1']}"
    comp = f"{raid1}/components/{fx['component']}"
    img = fx["image"]
    sock = fx["socket"]
    spec = json.loads(dumped)  # what is, plus one device
    spec["devices"].append({"name": "guard-new", "driver": "file", "components": [img]})
    spec = json.dumps(spec)
    table = {
        "Manager.CreateDevice": [
            ("change", ROOT + "/Manager",
             v("(ssa{ss}asa{sv})", "guard-new", "file", {}, [img], {})),
            ("change", ROOT + "/Manager",
             v("(ssa{ss}asa{sv})", "guard-new", "file", {}, [img],
               {"start": GLib.Variant("b", True)}))],
        "Manager.Apply": [
            ("change", ROOT + "/Manager", v("(sa{sv})", spec, {})),
            ("read", ROOT + "/Manager", v("(sa{sv})", spec, {"dry-run": GLib.Variant("b", True)}))],
        "Manager.Dump": [("read", ROOT + "/Manager", v("(a{sv})", {}))],
        "Manager.ListDevices": [("read", ROOT + "/Manager", v("(a{sv})", {}))],
        "Manager.Scan": [
            ("read", ROOT + "/Manager", v("(a{sv})", {"paths": GLib.Variant("as", [img])})),
            ("change", ROOT + "/Manager", v("(a{sv})", {"adopt": GLib.Variant("b", True)}))],
        "Manager.Wipe": [
            ("change", ROOT + "/Manager",
             v("(sa{sv})", fx["wipe"], {"force": GLib.Variant("b", True)}))],
        "Device.SetAttributes": [("change", dev, v("(a{ss}a{sv})", {"sector_size": "4096"}, {}))],
        "Device.AddComponent": [
            ("change", raid1, v("(sa{sv})", img, {"role": GLib.Variant("s", "spare")}))],
        "Device.Start": [("change", dev, v("(a{sv})", {}))],
        "Device.Stop": [("change", started, v("(a{sv})", {}))],
        "Device.Delete": [
            ("change", dev, v("(a{sv})", {})),
            ("change", started, v("(a{sv})", {"recursive": GLib.Variant("b", True)}))],
        "Device.Reconfigure": [
            ("change", raid1,
             v("(sa{ss}a{sv})", "raid1", {}, {"add": GLib.Variant("as", [img])}))],
        "Device.Export": [
            ("change", raid1, v("(sa{sv})", "nbd", {"listen": GLib.Variant("s", "unix:" + sock)})),
            ("change", raid1,
             v("(sa{sv})", "nbd", {"listen": GLib.Variant("s", "tcp:127.0.0.1:10919")}))],
        "Device.Check": [
            ("change", raid1, v("(a{sv})", {})),
            ("change", raid1, v("(a{sv})", {"repair": GLib.Variant("b", True)}))],
        "Device.WaitState": [("read", started, v("(sa{sv})", "active", {}))],
        "Component.SetFaulty": [("change", comp, v("(a{sv})", {}))],
        "Component.Remove": [("change", comp, v("(a{sv})", {}))],
        "Component.Replace": [("change", comp, v("(sa{sv})", img, {}))],
        "Job.Cancel": [("change", fx["job"], v("(a{sv})", {}))],
        "Policy.Reload": [("change", ROOT + "/Policy", v("(a{sv})", {}))],
        "Policy.Evaluate": [
            ("read", ROOT + "/Policy", v("(a{ss}a{sv})", {"ID_BUS": "usb"}, {}))],
    }
    # the polkit action each changing call is refused for (DESIGN.md's
    # list): the refusal names it
    actions = {key: "org.vblk." + action for key, action in ACTIONS.items()}
    actions["Device.Export"] = None  # two: by the address, below
    out = {}
    for key, entries in table.items():
        out[key] = []
        for kind, path, args in entries:
            action = actions.get(key)
            if key == "Device.Export":
                action = "org.vblk.export" if "tcp:" in args.print_(False) else "org.vblk.manage"
            out[key].append((kind, path, args, action if kind == "change" else None))
    return out


ACTIONS = {
    "Manager.CreateDevice": "manage", "Manager.Apply": "manage", "Manager.Scan": "manage",
    "Manager.Wipe": "delete", "Device.SetAttributes": "manage", "Device.AddComponent": "manage",
    "Device.Start": "start-stop", "Device.Stop": "start-stop", "Device.Delete": "delete",
    "Device.Reconfigure": "manage", "Device.Check": "manage", "Component.SetFaulty": "manage",
    "Component.Remove": "manage", "Component.Replace": "manage", "Job.Cancel": "manage",
    "Policy.Reload": "policy",
}


def main():
    xml_path, fixtures_path = sys.argv[1], sys.argv[2]
    interactive = "--interactive" in sys.argv[3:]
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    with open(xml_path, encoding="utf-8") as f:
        node = Gio.DBusNodeInfo.new_for_xml(f.read())
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    dumped = bus.call_sync(NAME, ROOT + "/Manager", PREFIX + "Manager", "Dump", v("(a{sv})", {}),
                           None, Gio.DBusCallFlags.NONE, 60000, None).unpack()[0]
    with open(fixtures_path, encoding="utf-8") as f:
        table = calls(json.load(f), dumped)
    flags = (Gio.DBusCallFlags.ALLOW_INTERACTIVE_AUTHORIZATION if interactive
             else Gio.DBusCallFlags.NONE)
    wrong = []
    refused = answered = 0
    declared = set()
    for iface in node.interfaces:
        if not iface.name.startswith(PREFIX):
            continue
        short = iface.name[len(PREFIX):]
        for prop in iface.properties:
            if prop.flags & Gio.DBusPropertyInfoFlags.WRITABLE:
                wrong.append(f"{short}.{prop.name}: a writable property (writes bypass polkit)")
        for method in iface.methods:
            key = f"{short}.{method.name}"
            declared.add(key)
            if key not in table:
                wrong.append(f"{key}: not classified in vb-api-guard.py (read or change?)")
                continue
            if only is not None and key != only:
                continue
            for kind, path, args, action in table[key]:
                message = ""
                try:
                    bus.call_sync(NAME, path, iface.name, method.name, args, None, flags, 60000,
                                  None)
                    outcome = "answered"
                except GLib.Error as e:
                    outcome = Gio.DBusError.get_remote_error(e) or e.message
                    message = e.message
                shown = args.print_(False)
                print(f"{kind:6} {key} {path} {shown}: {outcome} {message}")
                if kind == "change":
                    named = re.findall(r"org\.vblk\.[a-z-]+", message.split(": ", 1)[-1])
                    if outcome != REFUSED:
                        wrong.append(f"{key} {shown}: {outcome}, not NotAuthorized")
                    elif named[:1] != [action]:
                        wrong.append(f"{key} {shown}: refused for {named}, not for {action}")
                    else:
                        refused += 1
                elif outcome != "answered":
                    wrong.append(f"{key} {shown}: a read method refused: {outcome}")
                else:
                    answered += 1
    for key in sorted(set(table) - declared if only is None else ()):
        wrong.append(f"{key}: classified here but not in the XML")
    for w in wrong:
        print("WRONG: " + w, file=sys.stderr)
    print(f"{refused} changing calls refused, {answered} reading calls answered, "
          f"{len(wrong)} wrong")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
