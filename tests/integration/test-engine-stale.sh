#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vblkd killed (SIGKILL) while it serves engine devices: their FUSE servers
# die with it. The next vblkd detaches the dead loop devices, unmounts the
# stale FUSE mounts and starts the devices afresh; the data written and
# flushed before the kill is there.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon
vb_mkimg "$T/a.img" 32M; vb_mkimg "$T/b.img" 32M
vbmgr create m --driver raid1 --start "$T/a.img" "$T/b.img"
old=$(vb_blockdev_of m)
head -c 1M /dev/urandom > "$T/pattern"
dd if="$T/pattern" of="$old" bs=1M oflag=direct conv=fsync status=none

vb_kill_daemon
[ -n "$(grep " $VB_RUN_DIR/engine/" /proc/self/mounts || true)" ] ||
  vb_fail "expected the dead FUSE mount to be there before the restart"

vb_start_daemon
vb_wait_state m active 10
# the dead node is detached, not left behind its lazily unmounted FUSE file
# (whose path then reads "/data")
vb_assert_eq "" "$(losetup -l -n -O NAME,BACK-FILE | awk -v n="$old" '$1 == n && $2 == "/data"')" \
  "the dead engine node of the killed vblkd"
# let the udev events of the new node come and go: the rescans they cause
# must not take the live FUSE mount for a stale one
sleep 1
new=$(vb_blockdev_of m)
vb_assert_eq "" "$(grep " $VB_RUN_DIR/engine/" /proc/self/mounts | grep -v "$(vb_json m .uuid)" || true)" \
  "stale FUSE mounts after the restart"
vb_assert_eq 1 "$(grep -c " $VB_RUN_DIR/engine/" /proc/self/mounts)" "FUSE mounts after the restart"
vb_assert_eq "$new" "$(losetup -l -n -O NAME,BACK-FILE | awk -v d="$VB_RUN_DIR/engine" 'index($2, d) == 1 { print $1 }')" \
  "the one engine loop device"
cmp <(dd if="$new" bs=1M count=1 iflag=direct status=none) "$T/pattern" ||
  vb_fail "data written before the kill"
vbmgr stop m
vb_assert_eq "" "$(grep " $VB_RUN_DIR/engine/" /proc/self/mounts || true)" "FUSE mounts after stop"

vb_log "a clean exit (SIGTERM) takes engine nodes down cleanly; the next vblkd starts them again"
vbmgr start m
node=$(vb_blockdev_of m)
vb_stop_daemon
vb_assert_eq "" "$(grep " $VB_RUN_DIR/engine/" /proc/self/mounts || true)" "FUSE mounts after SIGTERM"
# this device's node only: tests running in parallel have engine nodes too
# (after a lazy unmount a loop device's backing file reads "/data")
vb_assert_eq "" "$(losetup -l -n -O NAME,BACK-FILE | awk -v n="$node" -v d="$VB_RUN_DIR" \
                    '$1 == n && (index($2, d) == 1 || $2 == "/data")')" \
  "engine loop device after SIGTERM"
vb_start_daemon
vb_wait_state m active 10
cmp <(dd if="$(vb_blockdev_of m)" bs=1M count=1 iflag=direct status=none) "$T/pattern" ||
  vb_fail "data after the clean restart"
vbmgr stop m
vb_stop_daemon
