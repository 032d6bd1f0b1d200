#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Online reconfiguration with a mounted ext4 and fio verifying a file in it
# the whole time: a plain file device (run by the engine) becomes a raid1
# with a new leg, the leg is rebuilt while fio runs, the original component
# is failed, and fio goes on reading and writing from the new leg alone.
# Not a single I/O error may reach fio; the filesystem checks clean after.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

vb_mkimg "$T/a.img" 256M
vb_mkimg "$T/b.img" 256M
mkdir "$T/mnt"
vbmgr create d --driver file --attr engine=true --start "$T/a.img"
bd=$(vb_blockdev_of d)
mkfs.ext4 -q -F "$bd"
mount "$bd" "$T/mnt"

# fio writes and verifies for the whole test (verify_backlog checks what it
# wrote while it goes on; any I/O error or mismatch ends it with an error)
fio_job=(--name=online --directory="$T/mnt" --filename=data --size=48M --ioengine=psync
         --direct=1 --rw=randrw --bs=4k --verify=crc32c --verify_backlog=256
         --verify_fatal=1 --time_based --runtime=40 --randseed=42)
fio "${fio_job[@]}" --output="$T/fio.log" &
fio_pid=$!
VB_BG_PIDS+=("$fio_pid")
sleep 3

vb_log "file -> raid1 with a new leg while mounted and in use"
vbmgr monitor --json > "$T/events.json" &
monitor_pid=$!
VB_BG_PIDS+=("$monitor_pid")
sleep 0.5
vbmgr reconfigure d --driver raid1 --add "$T/b.img" --attr sync_speed_min=4M --attr sync_speed_max=8M
vb_assert_eq "$bd" "$(vb_blockdev_of d)" "block node after the reconfiguration"
vb_assert_eq raid1 "$(vb_json d .driver)" "driver"
vb_assert_eq none "$(vb_json d .attributes.metadata)" "metadata of a mirror made from a plain file"
# the rebuild runs (8 MiB/s over 256 MiB): show displays both configurations
show=$(vbmgr show d)
grep -q "^Reconfigured: file of $T/a.img -> raid1 (rebuild running)" <<< "$show" ||
  vb_fail "show during the rebuild: $show"
vb_assert_eq "file of $T/a.img" "$(vb_json d .previous_configuration)" "previous configuration"
vb_state | jq -e '.devices[0].components[1].in_sync == false' > /dev/null ||
  vb_fail "the new leg is not recorded as behind: $(vb_state)"
vb_wait_until 5 grep -q '"reconfigured"' "$T/events.json" || vb_fail "no 'reconfigured' event"
event=$(jq -c 'select(.kind == "reconfigured")' "$T/events.json")
vb_assert_eq "d|file of $T/a.img|raid1 of $T/a.img, $T/b.img|true" \
  "$(jq -r '[.device, .details.old, .details.new, .details.started] | join("|")' <<< "$event")" \
  "the reconfigured event's old and new configuration"
kill "$monitor_pid"
held=$(grep -o "requests held [0-9]* us" "$VB_LOG" | tail -1)
[ -n "$held" ] || vb_fail "the swap did not report how long it held requests"
vb_log "swap: $held"
vbmgr set d sync_speed_min=0 sync_speed_max=0
vbmgr wait d --timeout 120 > /dev/null || vb_fail "rebuild of the new leg"
vb_wait_until 10 eval '[ -z "$(vb_json d .previous_configuration)" ]' ||
  vb_fail "previous configuration still shown after the rebuild"
vb_wait_until 10 eval '! vb_state | jq -e ".devices[0].components[1].in_sync == false" > /dev/null' ||
  vb_fail "the rebuilt leg is still recorded as behind"
vb_assert_eq active "$(vb_json d .state)" "state after the rebuild"

vb_log "the original component fails: fio goes on from the new leg"
vbmgr fail d "$T/a.img"
vb_wait_state d degraded 10 || vb_fail "not degraded after failing a.img"
vb_pid_alive "$fio_pid" || vb_fail "fio ended early: $(tail -20 "$T/fio.log")"
rc=0
wait "$fio_pid" || rc=$?
[ "$rc" = 0 ] || vb_fail "fio saw an error (exit $rc): $(tail -30 "$T/fio.log")"
grep -q "err= 0" "$T/fio.log" || vb_fail "fio reports errors: $(cat "$T/fio.log")"
vb_log "fio: $(grep -Eo 'IOPS=[^,]+' "$T/fio.log" | head -2 | tr '\n' ' ')"
vb_state | jq -e '.devices[0].components[0].in_sync == false' > /dev/null ||
  vb_fail "the failed leg is not recorded as behind"

umount "$T/mnt"
fsck.ext4 -n -f "$bd" > "$T/fsck.log" 2>&1 || vb_fail "fsck: $(cat "$T/fsck.log")"

vb_log "restart: the failed leg stays behind, the data comes from the rebuilt one"
vbmgr stop d
vbmgr start d
bd=$(vb_blockdev_of d)
fsck.ext4 -n -f "$bd" > "$T/fsck2.log" 2>&1 || vb_fail "fsck after restart: $(cat "$T/fsck2.log")"

vb_log "raid1 -> raid1: the failed leg out, a new one in; then -> file again"
vb_mkimg "$T/c.img" 256M
vbmgr reconfigure d --remove "$T/a.img" --add "$T/c.img"
vb_assert_eq "$T/b.img $T/c.img" "$(vb_state | jq -r '[.devices[0].components[] | .source] | join(" ")')" "legs"
vbmgr wait d --timeout 120 > /dev/null || vb_fail "rebuild of c.img"
vb_wait_state d active 10 || vb_fail "not active after the rebuild onto c.img"
cmp "$T/b.img" "$T/c.img" || vb_fail "the legs differ after the rebuild"
vbmgr reconfigure d --driver file --remove "$T/b.img"
vb_assert_eq "file $bd" "$(vb_json d .driver) $(vb_blockdev_of d)" "back to a plain file on the same node"
fsck.ext4 -n -f "$bd" > "$T/fsck3.log" 2>&1 || vb_fail "fsck on c.img alone: $(cat "$T/fsck3.log")"

vbmgr stop d
vbmgr delete d
vb_stop_daemon
