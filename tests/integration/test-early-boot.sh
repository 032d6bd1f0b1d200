#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vblkd before the system bus (issue 18, part 3's first step): at early boot
# there is no bus yet, and the root file system's devices must come up all
# the same. A vblkd started with no bus brings up the devices marked
# autostart, serves them (the data reads back through the stable link),
# and owns its name once the bus comes — changes then go through polkit as
# always; it tells systemd it is ready (sd_notify) once the devices are
# up, and its unit passes systemd-analyze verify. (Before: "vblkd: cannot
# connect to the system bus", exit 1.)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

vb_mkimg "$T/a.img" 40M
vb_mkimg "$T/b.img" 40M
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
head -c $((8 << 20)) /dev/urandom > "$T/expected"
dd if="$T/expected" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none
vb_stop_daemon

vb_log "a boot: a fresh run directory, and no system bus (nor polkitd) yet"
rm -rf "$VB_RUN_DIR"
vb__end_pid "$VB_POLKITD_PID"
VB_POLKITD_PID=
kill -TERM "$VB_DBUS_PID"
wait "$VB_DBUS_PID" 2> /dev/null || true
VB_DBUS_PID=
rm -f "$T/bus"
mkdir -p "$VB_RUN_DIR"
# systemd's readiness datagram (Type=notify): READY=1 once r1 is up
/usr/bin/python3 - "$T/notify" "$VB_DEV_DIR/r1" > "$T/notify.out" 2>&1 << 'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
msg = s.recv(4096).decode()
print(msg.replace("\n", " "), "| r1 there:", os.path.exists(sys.argv[2]), flush=True)
PY
listener=$!
VB_BG_PIDS+=("$listener")
vb_wait_until 10 test -S "$T/notify" || vb_fail "the notify listener did not start"
echo "=== vblkd start $(date +%T.%N) (no bus)" >> "$VB_LOG"
env G_DEBUG=fatal-criticals NOTIFY_SOCKET="$T/notify" "$VBLKD" --state-dir "$VB_STATE_DIR" \
  --run-dir "$VB_RUN_DIR" --dev-dir "$VB_DEV_DIR" --debug >> "$VB_LOG" 2>&1 &
VBLKD_PID=$!
vb_wait_until 20 test -b "$VB_DEV_DIR/r1" ||
  { cat "$VB_LOG" >&2; vb_fail "r1 did not come up without the bus"; }
wait "$listener" || vb_fail "no readiness datagram: $(cat "$T/notify.out")"
vb_assert_contains "$(cat "$T/notify.out")" "READY=1 STATUS=1 device(s), 1 running | r1 there: True" \
  "what vblkd told systemd"
vb_pid_alive "$VBLKD_PID" || vb_fail "vblkd left without a bus"
grep -q "no system bus yet; starting the devices now" "$VB_LOG" || vb_fail "vblkd did not say so"
cmp -n $((8 << 20)) "$T/expected" "$VB_DEV_DIR/r1" || vb_fail "r1's data without the bus"

vb_log "the bus comes: vblkd owns its name, changes go through polkit"
vb_start_bus
vb_start_polkitd
vb_wait_until 20 vb_name_has_owner "$VB_BUS_NAME" ||
  { cat "$VB_LOG" >&2; vb_fail "vblkd did not own $VB_BUS_NAME when the bus came"; }
vb_assert_eq active "$(vb_state_of r1)" "r1 once the bus is there"
vb_wait_until 10 eval 'vbmgr stop r1 2> /dev/null' || vb_fail "stop once the bus is there"
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" start r1
vbmgr start r1
vb_wait_state r1 active 20
cmp -n $((8 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "r1's data"
vbmgr stop r1
vbmgr delete r1
vb_stop_daemon

vb_log "the unit: early, ready by notification, after udev, before local-fs-pre"
sed "s|@sbindir@|$(dirname "$VBLKD")|" "$VB_SRCDIR/data/systemd/vblkd.service" > "$T/vblkd.service"
# (--man=no: the page is installed with the package, test-package checks it)
systemd-analyze verify --man=no "$T/vblkd.service" > "$T/verify.out" 2>&1 ||
  { cat "$T/verify.out" >&2; vb_fail "systemd-analyze verify of vblkd.service"; }
