#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Started devices outlive a clean vblkd exit (SIGTERM) and are adopted, not
# recreated, when vblkd comes back: same /dev/loopN, no second loop device.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

img=$T/disk.img
vb_mkimg "$img" 32M
vbmgr create disk --driver file "$img"
vbmgr create part --driver window --attr offset=1M vblk:disk
vbmgr start part
disk_bd=$(vb_blockdev_of disk)
part_bd=$(vb_blockdev_of part)
printf 'written before the restart' | dd of="$part_bd" bs=512 conv=sync,fsync oflag=direct status=none

vb_log "SIGTERM: vblkd exits 0 and leaves the devices running"
rc=0
vb_stop_daemon || rc=$?
vb_assert_eq 0 "$rc" "exit status of vblkd on SIGTERM"
vb_assert_eq "$disk_bd" "$(vb_loops_of "$img")" "loop device of disk after vblkd exited"
vb_assert_eq "$disk_bd" "$(losetup --list --noheadings --output BACK-FILE "$part_bd")" \
  "loop device of part after vblkd exited"

for round in 1 2; do
  vb_log "restart $round: the same block devices are adopted"
  vb_start_daemon
  vb_assert_eq active "$(vb_state_of disk)" "state of disk"
  vb_assert_eq active "$(vb_state_of part)" "state of part"
  vb_assert_eq "$disk_bd" "$(vb_blockdev_of disk)" "block device of disk"
  vb_assert_eq "$part_bd" "$(vb_blockdev_of part)" "block device of part"
  vb_assert_eq "$disk_bd" "$(vb_loops_of "$img")" "loop devices over the image"
  vb_assert_eq "$part_bd" "$(losetup --list --noheadings --output NAME,BACK-FILE |
                             awk -v b="$disk_bd" '$2 == b { print $1 }')" \
    "loop devices over $disk_bd"
  vb_assert_eq "$disk_bd" "$(readlink -f "$VB_DEV_DIR/disk")" "link of disk"
  vb_assert_eq "$part_bd" "$(readlink -f "$VB_DEV_DIR/part")" "link of part"
  vb_assert_eq "written before the restart" \
    "$(dd if="$part_bd" bs=512 count=1 iflag=direct status=none | tr -d '\0')" \
    "data on part"
  [ "$round" = 2 ] || vb_stop_daemon
done

vb_log "adopted devices are managed: a recursive stop tears both down"
vbmgr stop disk --recursive
vb_assert_eq "" "$(vb_loops_of "$img")" "loop devices over the image after stop"
vb_assert_eq stopped "$(vb_state_of part)" "state of part after stop"

vb_stop_daemon
