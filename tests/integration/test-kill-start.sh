#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vblkd killed (SIGKILL) at every step of Start, then restarted: the device ends
# up active on exactly one loop device with its link; none is leaked or doubled.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

steps=(start:after-persist start:after-loop-setup start:before-link)
i=0
for step in "${steps[@]}"; do
  i=$((i + 1))
  name=k$i
  img=$T/$name.img
  vb_log "step $step (device $name)"
  vb_mkimg "$img" 32M

  vb_start_daemon VBLK_TEST_STOP_AT="$step"
  vbmgr create "$name" --driver file "$img"
  vb_bg vbmgr start "$name"
  client=$VB_BG_PID
  vb_wait_stopped "$VBLKD_PID"
  vb_kill_daemon
  rc=0
  wait "$client" || rc=$?
  [ "$rc" -ne 0 ] || vb_fail "$step: vbmgr start succeeded although vblkd was killed"
  vb_log "$step: loop devices over the image after the kill: $(vb_loops_of "$img" | xargs)"

  vb_start_daemon
  vb_wait_state "$name" active 10
  bd=$(vb_blockdev_of "$name")
  [ -b "$bd" ] || vb_fail "$step: block_device '$bd' is not a block device"
  vb_assert_eq "$bd" "$(vb_loops_of "$img")" "$step: the one loop device over the image"
  vb_assert_eq "$bd" "$(readlink -f "$VB_DEV_DIR/$name")" "$step: link target"
  vb_assert_eq $((32 << 20)) "$(blockdev --getsize64 "$bd")" "$step: size of $bd"

  # The device is fully managed again: a stop leaves nothing behind.
  vbmgr stop "$name"
  vb_assert_eq "" "$(vb_loops_of "$img")" "$step: loop devices after stop"
  [ ! -L "$VB_DEV_DIR/$name" ] || vb_fail "$step: link left after stop"
  vb_stop_daemon
done
