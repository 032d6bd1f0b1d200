#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# UDisks sees vblk right (issue 18, part 5), with a real udisksd (Debian's
# udisks2) on the test's bus and data/udev's rules in the real udevd: a
# started device's node is a block object whose HintName is the device's
# name, a member shows IdUsage raid and IdType vblk_member, a wiped member
# shows neither; a python3-gi client (standing in for a disk utility) lists
# the vblk devices and their UDisks block objects together. Internal nodes
# — the loop devices under an md array of image files — are hidden
# (HintIgnore): shown where md exists (the vm suite runs this test on
# Debian's kernel; this host's kernel has no md, and says so).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
UDISKSD=/usr/libexec/udisks2/udisksd
[ -x "$UDISKSD" ] || { echo "SKIP: no udisksd (apt-get install udisks2)" >&2; exit 77; }
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import gi' 2> /dev/null ||
  { echo "SKIP: /usr/bin/python3 lacks python3-gi" >&2; exit 77; }
vb_setup

vb_install_udev_rules
vb_start_daemon

"$UDISKSD" --no-debug > "$T/udisksd.log" 2>&1 &
udisks_pid=$!
vb_on_cleanup_early "kill $udisks_pid 2> /dev/null; wait $udisks_pid 2> /dev/null"
vb_wait_until 20 vb_name_has_owner org.freedesktop.UDisks2 ||
  { cat "$T/udisksd.log" >&2; vb_fail "udisksd did not take org.freedesktop.UDisks2"; }

info () { udisksctl info -b "$1" 2> /dev/null; }
field () { info "$1" | sed -n "s/^ *$2: *//p" | head -n 1; }
# udisksd takes udev's news in its own time
wait_field () {
  local node=$1 key=$2 want=$3 i
  for ((i = 0; i < 100; i++)); do
    [ "$(field "$node" "$key")" = "$want" ] && return 0
    sleep 0.1
  done
  vb_fail "UDisks' $key of $node: expected '$want', got '$(field "$node" "$key")'"
}

for f in a b; do vb_mkimg "$T/$f.img" 48M; done
la=$(losetup --show -f "$T/a.img")
lb=$(losetup --show -f "$T/b.img")
name=udisks$$
vbmgr create "$name" --driver raid1 --start "$la" "$lb"
vbmgr wait "$name" > /dev/null || vb_fail "initial resync"
node=$(vb_blockdev_of "$name")
uuid=$(vb_json "$name" .uuid)
udevadm trigger --action=change --settle "$la" "$lb"

vb_log "the device's node: its name as UDisks' hint"
wait_field "$node" HintName "$name"
vb_log "members: IdUsage raid, IdType vblk_member"
wait_field "$la" IdUsage raid
wait_field "$la" IdType vblk_member
wait_field "$lb" IdUUID "$uuid"
wait_field "$lb" IdLabel "$name"

vb_log "a desktop tool's view: vblk devices and their UDisks block objects"
out=$(/usr/bin/python3 "$VB_SRCDIR/tests/integration/vb-udisks-list.py")
printf '%s\n' "$out" >&2
line=$(grep "^$name " <<< "$out") || vb_fail "$name not listed"
read -r _ lnode lobj lhint lshown <<< "$line"
vb_assert_eq "$node" "$lnode" "the listed node"
vb_assert_eq "/org/freedesktop/UDisks2/block_devices/$(basename "$node")" "$lobj" "the UDisks object"
vb_assert_eq "$name" "$lhint" "the listed hint"
vb_assert_eq shown "$lshown" "the device's node is not hidden"

if grep -qw raid1 /proc/mdstat 2> /dev/null || modprobe -q raid1 2> /dev/null; then
  vb_log "an md array of image files: its loop devices hidden from UDisks"
  for f in c d; do vb_mkimg "$T/$f.img" 48M; done
  vbmgr create kmd$$ --driver raid1 --backend kernel --start "$T/c.img" "$T/d.img"
  vbmgr wait kmd$$ > /dev/null || vb_fail "initial resync of kmd$$"
  for img in c d; do
    loop=$(losetup -j "$T/$img.img" -O NAME -n | head -n 1)
    [ -n "$loop" ] || vb_fail "no loop device under the md array for $img.img"
    udevadm settle
    vb_assert_contains "$(udevadm info -q property "$loop")" "UDISKS_IGNORE=1" "udev's word on $loop"
    wait_field "$loop" HintIgnore true
  done
  wait_field "$(vb_blockdev_of kmd$$)" HintName "kmd$$"
  wait_field "$(vb_blockdev_of kmd$$)" HintIgnore false
  vbmgr stop kmd$$
  vbmgr delete kmd$$
else
  vb_log "no md in this kernel: internal nodes' HintIgnore is shown by the vm suite's run"
fi

vb_log "stopped and wiped: UDisks sees a plain disk"
vbmgr stop "$name"
vbmgr delete "$name"
vbmgr wipe "$la" > /dev/null
udevadm trigger --action=change --settle "$la"
wait_field "$la" IdUsage ""
wait_field "$la" IdType ""
vb_stop_daemon
