#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Nothing vblkd serves depends on the bus (issue 15, defect G): the system
# bus going away while an engine device is written and read leaves vblkd
# running and the device serving — no I/O error, the data intact — and
# when a bus is back vblkd owns its name again, exports the same objects,
# and takes changes through polkit again. Only a real takeover
# (--replace) or SIGTERM makes it leave.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

vb_mkimg "$T/a.img" 40M
vb_mkimg "$T/b.img" 40M
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait r1 > /dev/null
node=$(vb_blockdev_of r1)

vb_log "writes and reads go on while the bus is killed"
fio --name=busgone --filename="$node" --rw=randrw --bs=4k --direct=1 --ioengine=psync \
  --size=32M --time_based --runtime=12 --verify=crc32c --verify_fatal=1 \
  --output="$T/fio.out" > /dev/null 2>&1 &
fio_pid=$!
VB_BG_PIDS+=("$fio_pid")
sleep 2
kill -KILL "$VB_DBUS_PID"
wait "$VB_DBUS_PID" 2> /dev/null || true
VB_DBUS_PID=
# polkitd has no bus to serve either
vb__end_pid "$VB_POLKITD_PID"
VB_POLKITD_PID=
sleep 3
vb_pid_alive "$VBLKD_PID" || { cat "$VB_LOG" >&2; vb_fail "vblkd left when the bus went away"; }
grep -q "the system bus went away; every device keeps running" "$VB_LOG" ||
  vb_fail "vblkd did not say the bus went away"

vb_log "a new bus and polkitd: vblkd owns its name again"
rm -f "$T/bus"
vb_start_bus
vb_start_polkitd
vb_wait_until 20 vb_name_has_owner "$VB_BUS_NAME" ||
  { cat "$VB_LOG" >&2; vb_fail "vblkd did not own $VB_BUS_NAME on the new bus"; }
rc=0
wait "$fio_pid" || rc=$?
vb_assert_eq 0 "$rc" "fio's exit status (verify across the bus's death)"
grep -q "err= 0" "$T/fio.out" || { cat "$T/fio.out" >&2; vb_fail "fio saw errors"; }
vb_pid_alive "$VBLKD_PID" || vb_fail "vblkd left"

vb_assert_eq active "$(vb_state_of r1)" "r1 on the new bus"
vb_assert_eq "$node" "$(vb_blockdev_of r1)" "r1's node on the new bus"
vb_log "changes go through polkit again"
vb_wait_until 10 eval 'vbmgr stop r1 2> /dev/null' || vb_fail "stop after the bus came back"
vbmgr start r1
vb_wait_state r1 active 20
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" stop r1

vb_log "the bus restarted twice more, quickly"
for round in 1 2; do
  kill -KILL "$VB_DBUS_PID"
  wait "$VB_DBUS_PID" 2> /dev/null || true
  vb__end_pid "$VB_POLKITD_PID"
  sleep 0.3
  rm -f "$T/bus"
  vb_start_bus
  vb_start_polkitd
  vb_wait_until 20 vb_name_has_owner "$VB_BUS_NAME" || vb_fail "round $round: name not owned again"
done
vb_assert_eq active "$(vb_state_of r1)" "r1 after the restarts"
dd if="$(vb_blockdev_of r1)" of=/dev/null bs=1M iflag=direct status=none || vb_fail "r1 reads"

vb_log "SIGTERM still ends it"
vb_stop_daemon
vb_log "ok"
