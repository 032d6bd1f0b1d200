#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A loop device detached behind vblkd's back (losetup -d) is seen through the
# udev watch: the device turns 'failed' with a device-disappeared event and
# its link goes; a Start brings it back on a new node.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

img=$T/disk.img
vb_mkimg "$img" 16M
vbmgr create disk --driver file --start "$img"
bd=$(vb_blockdev_of disk)
[ -b "$bd" ] || vb_fail "no block device after create --start"

gdbus monitor --system --dest org.vblk.VBlk1 > "$T/monitor.log" 2>&1 &
monitor=$!
sleep 0.5

vb_log "detach $bd outside vblk"
losetup -d "$bd"
vb_wait_state disk failed 10
vb_assert_eq "" "$(vb_blockdev_of disk)" "block_device after the detach"
[ ! -L "$VB_DEV_DIR/disk" ] || vb_fail "link left after the node vanished"
vb_assert_eq "" "$(vb_loops_of "$img")" "loop devices over the image"
sleep 0.3
kill "$monitor"
wait "$monitor" 2> /dev/null || true
grep -q "'device-disappeared'" "$T/monitor.log" ||
  vb_fail "no device-disappeared event: $(cat "$T/monitor.log")"

vb_log "an unrelated change does not restart it behind the administrator's back"
vb_mkimg "$T/other.img" 1M
vbmgr create other --driver file --start "$T/other.img"
vb_assert_eq failed "$(vb_state_of disk)" "state of disk after another device started"
vb_assert_eq "" "$(vb_loops_of "$img")" "loop devices over the image after another start"

vb_log "Start brings it back"
vbmgr start disk
vb_assert_eq active "$(vb_state_of disk)" "state after start"
vb_assert_eq "$(vb_blockdev_of disk)" "$(vb_loops_of "$img")" "the one loop device"
vbmgr stop disk
vbmgr stop other

vb_log "an engine device's loop detached outside vblk, then attached for another device: that device's alone"
vb_mkimg "$T/eng.img" 16M
vb_mkimg "$T/plain.img" 16M
vbmgr create eng --driver file --attr engine=true --start "$T/eng.img"
ebd=$(vb_blockdev_of eng)
losetup -d "$ebd"
vb_wait_state eng failed 30
vbmgr create plain --driver file --start "$T/plain.img"
pbd=$(vb_blockdev_of plain)
vb_assert_eq "$ebd" "$pbd" "the loop plain took (the lowest free: eng's)"
# udev's event about the node: plain's node is plain's, not eng's
udevadm trigger --action=change "$pbd"
udevadm settle
sleep 1
vb_assert_eq active "$(vb_state_of plain)" "plain after an event about its node"
vb_assert_eq failed "$(vb_state_of eng)" "eng after that event"
printf 'plain\n%.0s' $(seq 1 2000) | dd of="$VB_DEV_DIR/plain" bs=4096 conv=fsync status=none
cmp -n 8192 "$VB_DEV_DIR/plain" "$T/plain.img" || vb_fail "plain's node does not read plain's image"
vb_assert_eq plain "$(head -c 5 "$T/plain.img")" "what was written through plain's link, in plain.img"
if grep -q plain "$T/eng.img"; then vb_fail "plain's writes reached eng.img"; fi
vbmgr stop plain
vb_assert_eq "" "$(vb_loops_of "$T/plain.img")" "loop devices over plain.img after its stop"
# its first engine still runs in vblkd (what is stacked on it in place may
# use it): a second on the same image is refused until vblkd restarts
if vbmgr start eng > "$T/start.out" 2>&1; then vb_fail "eng started beside its earlier engine"; fi
grep -q "engine of an earlier start still runs" "$T/start.out" ||
  vb_fail "the refusal does not say why: $(cat "$T/start.out")"
vb_stop_daemon
vb_start_daemon
vbmgr start eng
vb_assert_eq active "$(vb_state_of eng)" "eng started after vblkd's restart"
vbmgr stop eng
vb_stop_daemon
