#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A window on vblk:disk: starting it starts disk first and builds on disk's node;
# disk cannot be stopped or deleted under it (Busy) unless recursive; the graph
# (text, --dot, --json) shows the edge.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

img=$T/disk.img
vb_mkimg "$img" 64M
vbmgr create disk --driver file "$img"
vbmgr create part --driver window --attr offset=1M --attr size=16M vblk:disk
vb_assert_eq "vblk:disk" "$(vb_json part '.components[0].source')" "component of part"
vb_assert_eq '["part"]' "$(vb_json disk '.dependents | tostring')" "dependents of disk"

vb_log "graph: text, --dot, --json"
g=$(vbmgr graph)
vb_assert_contains "$g" disk "vbmgr graph"
vb_assert_contains "$g" part "vbmgr graph"
g=$(vbmgr graph --dot)
vb_assert_contains "$g" digraph "vbmgr graph --dot"
grep -Eq '"?part"?[[:space:]]*->[[:space:]]*"?disk"?|"?disk"?[[:space:]]*->[[:space:]]*"?part"?' <<< "$g" ||
  vb_fail "vbmgr graph --dot has no edge between part and disk: $g"
g=$(vbmgr graph --json)
vb_assert_eq '["disk","part"]' "$(jq -c '.devices | sort' <<< "$g")" "graph --json devices"
vb_assert_eq '[{"component":"disk","device":"part"}]' \
  "$(jq -cS '.edges' <<< "$g")" "graph --json edges"

vb_log "start part: disk is started first and part is built on disk's node"
vbmgr start part
vb_assert_eq active "$(vb_state_of disk)" "disk after starting part"
vb_assert_eq active "$(vb_state_of part)" "part after starting part"
disk_bd=$(vb_blockdev_of disk)
part_bd=$(vb_blockdev_of part)
vb_assert_eq "$disk_bd" "$(losetup --list --noheadings --output BACK-FILE "$part_bd")" \
  "backing of part's loop device"
vb_assert_eq $((16 << 20)) "$(blockdev --getsize64 "$part_bd")" "size of part"
vb_assert_eq "$disk_bd" "$(vb_loops_of "$img")" "one loop device over the image"

vb_log "stop/delete of disk under part: Busy, nothing changes"
vb_snapshot
vb_expect_fail Busy vbmgr stop disk
vb_assert_contains "$VB_ERR" "part" "Busy message of stop"
vb_expect_fail Busy vbmgr delete disk
vb_assert_contains "$VB_ERR" "part" "Busy message of delete"
vb_assert_unchanged "refused stop/delete of disk"
[ -b "$part_bd" ] || vb_fail "a refused stop removed $part_bd"
vb_assert_eq "$disk_bd" "$(vb_loops_of "$img")" "loop device of disk after refused stop"

vb_log "stop part alone leaves disk running"
vbmgr stop part
vb_assert_eq stopped "$(vb_state_of part)" "part after stop part"
vb_assert_eq active "$(vb_state_of disk)" "disk after stop part"

vb_log "recursive stop of disk stops part first"
vbmgr start part
# show fetches the device's objects alone, list every object: the same
for d in disk part; do
  vb_assert_eq "$(vbmgr list --json | jq -S --arg d "$d" '.[] | select(.name == $d)')" \
    "$(vbmgr show "$d" --json | jq -S .)" "show --json of $d against its list entry"
done
vb_assert_contains "$(vbmgr show part)" "disk" "show part names what it is built on"
vb_expect_fail NotFound vbmgr show nosuch
vbmgr stop disk --recursive
vb_assert_eq stopped "$(vb_state_of part)" "part after recursive stop"
vb_assert_eq stopped "$(vb_state_of disk)" "disk after recursive stop"
# the loop device goes when its last opener lets go (a udev probe of the
# stop's change event may still hold it a moment on a busy machine)
vb_wait_until 5 eval '[ -z "$(vb_loops_of "$img")" ]' || true
vb_assert_eq "" "$(vb_loops_of "$img")" "loop devices over the image"
[ "$(losetup --list --noheadings --output BACK-FILE "$part_bd" 2> /dev/null)" != "$disk_bd" ] ||
  vb_fail "part's loop device $part_bd still sits on $disk_bd"

vb_log "recursive delete of disk deletes part"
vb_expect_fail Busy vbmgr delete disk
vbmgr delete disk --recursive
vb_assert_eq 0 "$(vbmgr list --json | jq length)" "devices after recursive delete"
vb_assert_eq 0 "$(vb_state | jq '.devices | length')" "devices in state.json"

vb_stop_daemon
