#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# create/start/stop/delete of a file device: the block node and /dev/vblk link
# exist only while the device is started, and state.json follows every change.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

img=$T/disk.img
vb_mkimg "$img" 64M

vb_log "create: device exists, no block node, no link, no loop device"
vbmgr create disk --driver file "$img"
vb_assert_eq ready "$(vb_state_of disk)" "state after create"
vb_assert_eq "" "$(vb_blockdev_of disk)" "block_device after create"
vb_assert_absent "$VB_DEV_DIR/disk" "link before start"
vb_assert_eq "" "$(vb_loops_of "$img")" "loop devices over the image before start"
vb_assert_eq disk "$(vbmgr list --json | jq -r '.[].name')" "list after create"
[ -f "$VB_STATE_FILE" ] || vb_fail "no state.json after create"
vb_assert_eq "disk file $img" \
  "$(vb_state | jq -r '.devices[] | "\(.name) \(.driver) \(.components[0].source)"')" \
  "state.json after create"
vb_assert_eq "$(vb_json disk .uuid)" \
  "$(vb_state | jq -r '.devices[] | select(.name == "disk") | .uuid')" \
  "uuid in state.json and on D-Bus"

vb_log "start: block node and link appear"
vbmgr start disk
vb_assert_eq active "$(vb_state_of disk)" "state after start"
bd=$(vb_blockdev_of disk)
[ -b "$bd" ] || vb_fail "block_device '$bd' is not a block device"
vb_assert_eq "$bd" "$(vb_loops_of "$img")" "the one loop device over the image"
[ -L "$VB_DEV_DIR/disk" ] || vb_fail "no link $VB_DEV_DIR/disk after start"
vb_assert_eq "$bd" "$(readlink -f "$VB_DEV_DIR/disk")" "link target"
vb_assert_eq $((64 << 20)) "$(blockdev --getsize64 "$bd")" "size of $bd"
vb_assert_eq $((64 << 20)) "$(vb_json disk .size)" "Size property"
vb_state | jq -e '.devices[] | select(.name == "disk")' > /dev/null ||
  vb_fail "device missing from state.json after start"

vb_log "stop: block node and link go away, the device stays"
vbmgr stop disk
vb_assert_eq stopped "$(vb_state_of disk)" "state after stop"
vb_assert_eq "" "$(vb_blockdev_of disk)" "block_device after stop"
vb_assert_absent "$VB_DEV_DIR/disk" "link after stop"
vb_assert_eq "" "$(vb_loops_of "$img")" "loop devices over the image after stop"
vb_state | jq -e '.devices[] | select(.name == "disk")' > /dev/null ||
  vb_fail "device missing from state.json after stop"

vb_log "start again, then delete a started device: it is stopped and forgotten"
vbmgr start disk
vb_assert_eq active "$(vb_state_of disk)" "state after second start"
vbmgr delete disk
vb_expect_fail NotFound vbmgr show disk
vb_assert_eq 0 "$(vbmgr list --json | jq length)" "devices after delete"
vb_assert_eq 0 "$(vb_state | jq '.devices | length')" "devices in state.json after delete"
vb_assert_eq "" "$(vb_loops_of "$img")" "loop devices over the image after delete"
vb_assert_absent "$VB_DEV_DIR/disk" "link after delete"
[ -f "$img" ] || vb_fail "delete removed the image file"

vb_stop_daemon

vb_log "without vblkd: show (one object) and list (all) say so alike"
for cmd in "show disk" list; do
  rc=0
  # shellcheck disable=SC2086
  out=$(vbmgr $cmd 2>&1) || rc=$?
  vb_assert_eq 1 "$rc" "exit status of vbmgr $cmd without vblkd"
  vb_assert_contains "$out" "cannot reach vblkd: no process owns $VB_BUS_NAME" "vbmgr $cmd without vblkd"
done
