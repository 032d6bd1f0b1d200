#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A window device maps its block node onto [offset, offset+size) of its
# component: data written through the node lands in the image file at exactly
# offset+X, reads return the file's bytes there, and nothing outside changes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

img=$T/disk.img
orig=$T/disk.orig
offset=$(((3 << 20) + 512))       # not MiB-aligned on purpose
size=$((8 << 20))
dd if=/dev/urandom of="$img" bs=1M count=32 status=none
cp "$img" "$orig"

vbmgr create win --driver window --attr offset=$offset --attr size=8M "$img"
vb_assert_eq "$offset" "$(vb_json win .attributes.offset)" "offset attribute"
vb_assert_eq "$size" "$(vb_json win .attributes.size)" "size attribute (stored in bytes)"
vbmgr start win
node=$(vb_blockdev_of win)
[ -b "$node" ] || vb_fail "no block node for win ('$node')"
vb_assert_eq "$size" "$(blockdev --getsize64 "$node")" "size of $node"

vb_log "reads through the node return the file's bytes at the offset"
cmp -n 1048576 -i 0:"$offset" "$node" "$orig" ||
  vb_fail "first MiB of $node differs from the image at offset $offset"

vb_log "writes land at offset+X"
x1=$((512 << 10))
dd if=/dev/urandom of="$T/pat1" bs=64K count=32 status=none   # 2 MiB
dd if="$T/pat1" of="$node" bs=4K seek=$((x1 / 4096)) oflag=direct conv=notrunc,fsync status=none
x2=$((size - 4096))                                           # the window's last block
dd if=/dev/urandom of="$T/pat2" bs=4K count=1 status=none
dd if="$T/pat2" of="$node" bs=4K seek=$((x2 / 4096)) oflag=direct conv=notrunc,fsync status=none

vb_log "a write past the end of the window is refused"
if dd if="$T/pat2" of="$node" bs=4K seek=$((size / 4096)) oflag=direct conv=notrunc \
     status=none 2> /dev/null; then
  vb_fail "write past the end of the window succeeded"
fi

vbmgr stop win   # detach: everything is in the file now
vb_assert_eq "" "$(vb_loops_of "$img")" "loop devices after stop"

len1=$(stat -c %s "$T/pat1")
cmp -n "$len1" -i 0:$((offset + x1)) "$T/pat1" "$img" ||
  vb_fail "pattern 1 not found at offset+X = $((offset + x1)) in the image"
cmp -n 4096 -i 0:$((offset + x2)) "$T/pat2" "$img" ||
  vb_fail "pattern 2 not found at offset+X = $((offset + x2)) in the image"

vb_log "bytes outside the written ranges are untouched"
cmp -n $((offset + x1)) "$img" "$orig" ||
  vb_fail "bytes before offset+X changed"
gap_start=$((offset + x1 + len1))
cmp -n $((offset + x2 - gap_start)) -i $gap_start:$gap_start "$img" "$orig" ||
  vb_fail "bytes between the two writes changed"
tail_start=$((offset + x2 + 4096))
cmp -i $tail_start:$tail_start "$img" "$orig" ||
  vb_fail "bytes after the window changed"
vb_assert_eq $((32 << 20)) "$(stat -c %s "$img")" "image size"

vb_stop_daemon
