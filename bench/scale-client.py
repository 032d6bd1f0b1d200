#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench-scale.sh's D-Bus client, as a desktop tool or an installer would be
one (plain Gio on the system bus).

  scale-client.py create DIR FIRST COUNT   CreateDevice of file devices
      sDIR/FIRST.img ... on one connection, one after the other; prints
      one line per 100 creates: "DONE SECONDS" since the start
  scale-client.py start FIRST COUNT       Device.Start of sFIRST ... one after
  scale-client.py stop FIRST COUNT        the other (Stop): prints "SECONDS"
  scale-client.py objects                 GetManagedObjects: "OBJECTS MS
      WRITE_MS READ_MS BYTES", WRITE_MS and READ_MS what GDBus alone takes to
      write that reply as D-Bus bytes and to read it back (the floor of any
      GDBus server and client)
  scale-client.py one DIR N               one more create and its delete:
      "CREATE_MS DELETE_MS"
"""
import sys
import time

from gi.repository import Gio, GLib

NAME = "org.vblk.VBlk1"
ROOT = "/org/vblk/VBlk1"


def call(bus, path, iface, method, args):
    return bus.call_sync(NAME, path, iface, method, args, None, Gio.DBusCallFlags.NONE,
                         600000, None)


def create(bus, directory, i):
    call(bus, ROOT + "/Manager", NAME + ".Manager", "CreateDevice",
         GLib.Variant("(ssa{ss}asa{sv})",
                      ("s%d" % i, "file", {}, ["%s/%d.img" % (directory, i)], {})))


def main():
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    if sys.argv[1] == "create":
        directory, first, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        start = time.monotonic()
        for n, i in enumerate(range(first, first + count), 1):
            create(bus, directory, i)
            if n % 100 == 0 or n == count:
                print(n, "%.3f" % (time.monotonic() - start), flush=True)
    elif sys.argv[1] in ("start", "stop"):
        first, count = int(sys.argv[2]), int(sys.argv[3])
        start = time.monotonic()
        for i in range(first, first + count):
            call(bus, "%s/devices/s%d" % (ROOT, i), NAME + ".Device", sys.argv[1].capitalize(),
                 GLib.Variant("(a{sv})", ({},)))
        print("%.3f" % (time.monotonic() - start))
    elif sys.argv[1] == "objects":
        message = Gio.DBusMessage.new_method_call(NAME, ROOT, "org.freedesktop.DBus.ObjectManager",
                                                  "GetManagedObjects")
        start = time.monotonic()
        reply, _ = bus.send_message_with_reply_sync(message, Gio.DBusSendMessageFlags.NONE,
                                                    600000, None)
        ms = (time.monotonic() - start) * 1000
        reply.to_gerror()
        # GDBus's own cost of this reply, whoever serves it: writing it as
        # D-Bus bytes (the server's part) and reading them back (the client's)
        start = time.monotonic()
        blob = reply.to_blob(Gio.DBusCapabilityFlags.NONE)
        write_ms = (time.monotonic() - start) * 1000
        start = time.monotonic()
        Gio.DBusMessage.new_from_blob(blob, Gio.DBusCapabilityFlags.NONE)
        read_ms = (time.monotonic() - start) * 1000
        print(len(reply.get_body().unpack()[0]), "%.1f" % ms, "%.1f" % write_ms, "%.1f" % read_ms,
              len(blob))
    elif sys.argv[1] == "one":
        directory, i = sys.argv[2], int(sys.argv[3])
        start = time.monotonic()
        create(bus, directory, i)
        created = time.monotonic()
        call(bus, "%s/devices/s%d" % (ROOT, i), NAME + ".Device", "Delete",
             GLib.Variant("(a{sv})", ({},)))
        print("%.1f %.1f" % ((created - start) * 1000, (time.monotonic() - created) * 1000))


if __name__ == "__main__":
    main()
