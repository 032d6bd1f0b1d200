#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A blank disk at a component's path is not that component (assembly rule
# 1c; found by the torture test, seed 2, 120-s runs, step 138): a stopped
# raid1's leg is unplugged and a blank disk of the same size takes its
# loop number; the next start used to take the blank disk for the leg,
# "new to the device", and rebuild onto it. Now the slot stays out, the
# blank disk is never written, the device runs degraded, and the leg,
# plugged back at another number, is re-added by the policy and brought up
# to date.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

vb_policy_assemble
vb_start_daemon

for f in a b stranger; do vb_mkimg "$T/$f.img" 37M; done
la=$(losetup --show -f "$T/a.img")
lb=$(losetup --show -f "$T/b.img")
vbmgr create r1 --driver raid1 --start "$la" "$lb"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
head -c $((16 << 20)) /dev/urandom > "$T/expected"
dd if="$T/expected" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none
vbmgr stop r1

vb_log "b unplugged; a blank disk of its size at its number; start"
losetup -d "$lb"
vb_wait_until 10 bash -c "! losetup '$lb' > /dev/null 2>&1"
losetup "$lb" "$T/stranger.img"
udevadm settle
vbmgr start r1
vb_assert_eq degraded "$(vb_state_of r1)" "r1 with a stranger at b's path"
cmp -n $((16 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "data differs (degraded)"
dd if="$(vb_blockdev_of r1)" of=/dev/null bs=1M iflag=direct status=none
cmp -n $((2 << 20)) "$T/stranger.img" /dev/zero || vb_fail "the blank disk at b's path was written"
vb_assert_contains "$(cat "$VB_LOG")" "the disk at its path is blank, not its component" "vblkd's word"
vbmgr examine "$lb" > /dev/null 2>&1 && vb_fail "the stranger got a superblock"

vb_log "b back at another number: re-added by the policy, brought up to date"
losetup -d "$lb"
lb2=$(losetup --show -f "$T/b.img")
udevadm settle
vb_wait_until 30 test "$(vb_state_of r1)" = active ||
  { vbmgr wait r1 > /dev/null; test "$(vb_state_of r1)" = active; } ||
  vb_fail "b was not taken back: $(vbmgr show r1)"
vbmgr wait r1 > /dev/null || vb_fail "b's catch-up"
vb_assert_eq "in-sync in-sync" "$(vb_json r1 '[.components[] | .state] | join(" ")')" "both legs"
vb_assert_contains "$(vb_json r1 '[.components[] | .source] | join(" ")')" "$lb2" "b's new path"
vbmgr stop r1
cmp -n $((35 << 20)) <(tail -c +$(((1 << 20) + 1)) "$T/a.img") <(tail -c +$(((1 << 20) + 1)) "$T/b.img") ||
  vb_fail "the legs differ after b's catch-up"
vbmgr delete r1
vb_stop_daemon
