#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vblkd killed (SIGKILL) at every step of Delete of a started device, then
# restarted: the device is gone, and so are its loop device and link.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

steps=(delete:after-persist delete:after-teardown)
i=0
for step in "${steps[@]}"; do
  i=$((i + 1))
  name=k$i
  img=$T/$name.img
  vb_log "step $step (device $name)"
  vb_mkimg "$img" 32M

  vb_start_daemon VBLK_TEST_STOP_AT="$step"
  vbmgr create "$name" --driver file "$img"
  vbmgr start "$name"
  bd=$(vb_blockdev_of "$name")
  vb_assert_eq "$bd" "$(vb_loops_of "$img")" "$step: loop device before delete"
  vb_bg vbmgr delete "$name"
  client=$VB_BG_PID
  vb_wait_stopped "$VBLKD_PID"
  vb_kill_daemon
  rc=0
  wait "$client" || rc=$?
  [ "$rc" -ne 0 ] || vb_fail "$step: vbmgr delete succeeded although vblkd was killed"
  vb_log "$step: loop devices over the image after the kill: $(vb_loops_of "$img" | xargs)"

  vb_start_daemon
  vb_wait_until 10 eval '[ -z "$(vb_loops_of "$img")" ]' ||
    vb_fail "$step: loop device(s) $(vb_loops_of "$img" | xargs) left over the image"
  vb_expect_fail NotFound vbmgr show "$name"
  vb_assert_eq 0 "$(vbmgr list --json | jq length)" "$step: devices after restart"
  vb_assert_eq 0 "$(vb_state | jq '.devices | length')" "$step: devices in state.json"
  vb_assert_absent "$VB_DEV_DIR/$name" "$step: link after restart"
  [ -f "$img" ] || vb_fail "$step: image file removed"
  vb_stop_daemon
done
