#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a desktop disk utility sees (issue 18, part 5): every vblk device
(org.vblk.VBlk1) with the UDisks block object of its node
(org.freedesktop.UDisks2) side by side, one line each:
NAME NODE UDISKS_OBJECT HINT_NAME HINT_IGNORE, with "-" where UDisks has
no object for the node. Plain Gio over the system bus, as a desktop tool
would do it."""
import sys

from gi.repository import Gio, GLib

bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)


def managed(name, path):
    reply = bus.call_sync(name, path, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects",
                          None, GLib.VariantType("(a{oa{sa{sv}}})"), Gio.DBusCallFlags.NONE, 10000,
                          None)
    return reply.unpack()[0]


def main():
    blocks = {}
    for path, ifaces in managed("org.freedesktop.UDisks2", "/org/freedesktop/UDisks2").items():
        block = ifaces.get("org.freedesktop.UDisks2.Block")
        if block is None:
            continue
        node = bytes(block["Device"]).rstrip(b"\0").decode()
        blocks[node] = (path, block.get("HintName", ""), block.get("HintIgnore", False))
    for path, ifaces in sorted(managed("org.vblk.VBlk1", "/org/vblk/VBlk1").items()):
        dev = ifaces.get("org.vblk.VBlk1.Device")
        if dev is None:
            continue
        node = dev.get("BlockDevice", "") or "-"
        obj, hint, ignore = blocks.get(node, ("-", "", False))
        print(dev["Name"], node, obj, hint or "-", "ignore" if ignore else "shown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
