#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Block nodes belong to the vblkd of one state dir: a vblkd with another
# state dir neither adopts nor detaches them. --replace hands a running
# vblkd's devices over to a new one without touching them.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

img=$T/disk.img
vb_mkimg "$img" 16M
state_a=$VB_STATE_DIR
state_b=$T/state-b

vb_log "instance A starts a device and exits, leaving it running"
vb_start_daemon
vbmgr create disk --driver file --start "$img"
bd=$(vb_blockdev_of disk)
vb_stop_daemon

vb_log "instance B (another state dir) leaves A's loop device alone"
VB_STATE_DIR=$state_b
vb_start_daemon
vb_assert_eq "[]" "$(vbmgr list --json | jq -c .)" "devices of instance B"
sleep 0.5
vb_assert_eq "$bd" "$(vb_loops_of "$img")" "A's loop device while B runs"
vb_stop_daemon
vb_assert_eq "$bd" "$(vb_loops_of "$img")" "A's loop device after B exited"
[ "$(cat "$state_a/instance-id")" != "$(cat "$state_b/instance-id")" ] ||
  vb_fail "both state dirs have the same instance id"

vb_log "instance A adopts it again"
VB_STATE_DIR=$state_a
vb_start_daemon
# the start-up op adopts the node a moment after vblkd owns its name
vb_wait_state disk active 10
vb_assert_eq "$bd" "$(vb_blockdev_of disk)" "block device after restart of A"

vb_log "--replace: a new vblkd takes over; the old one exits 0; nothing is recreated"
old=$VBLKD_PID
"$VBLKD" --replace --state-dir "$VB_STATE_DIR" --run-dir "$VB_RUN_DIR" \
  --dev-dir "$VB_DEV_DIR" --debug >> "$VB_LOG" 2>&1 &
VBLKD_PID=$!
rc=0
vb__wait_pid "$old" || rc=$?
vb_assert_eq 0 "$rc" "exit status of the replaced vblkd"
vb_wait_state disk active 15
vb_pid_alive "$VBLKD_PID" || vb_fail "the replacing vblkd is not running"
vb_assert_eq "$bd" "$(vb_blockdev_of disk)" "block device after --replace"
vb_assert_eq "$bd" "$(vb_loops_of "$img")" "the one loop device after --replace"
vbmgr stop disk
vb_assert_eq "" "$(vb_loops_of "$img")" "loop devices after stop"
vb_stop_daemon
