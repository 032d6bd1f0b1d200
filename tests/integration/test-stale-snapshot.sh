#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# An older copy of a raid1 leg comes back (a restored image, a disk that
# missed writes) after the bitmap bits of what it missed were cleared: it
# must be rebuilt in full, never read, never "resynced" from a bitmap that
# no longer knows what it missed (md's rule: events below the bitmap's
# events_cleared mean a full rebuild). Three ways to get there:
#  - the copy was taken while the device was stopped, the sweeper cleared
#    the bits of the writes made after it (issue 15, defect A);
#  - the copy was taken while the device ran (its events equal the
#    device's then), the clean stop cleared the bits;
#  - split brain: each leg ran alone for a while; the one whose superblock
#    says the other was not in sync has diverged and is rebuilt in full.
# After each start every block is read several times with O_DIRECT (the
# reads are balanced over the legs) and compared with what was written; once
# the job ends the legs' data areas are equal byte for byte.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

# check_reads NODE EXPECTED — every 64 KiB block of NODE read 4 times in a
# row (consecutive requests go to different legs) equals EXPECTED.
check_reads () {
  python3 - "$1" "$2" <<'PY' || vb_fail "reads of $1 differ from $2"
import mmap, os, sys
node, expected = sys.argv[1], sys.argv[2]
block = 64 << 10
fd = os.open(node, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, block)
size = os.path.getsize(expected)
bad = 0
with open(expected, "rb") as f:
    for off in range(0, size, block):
        want = f.read(block)
        for _ in range(4):
            n = os.preadv(fd, [buf], off)
            if n != len(want) or buf[:n] != want:
                bad += 1
os.close(fd)
if bad:
    print(f"{bad} block reads of {node} differ from {expected}", file=sys.stderr)
    sys.exit(1)
PY
}

# legs_equal A B — the data areas (from 1 MiB) are equal.
legs_equal () {
  cmp -i 1M:1M "$1" "$2" || vb_fail "the legs' data areas differ: $1 $2"
}

size=$((63 << 20))
head -c $size /dev/urandom > "$T/X"
head -c $size /dev/urandom > "$T/Y"

vb_log "a copy of a leg taken while stopped, put back after the bitmap was cleared"
vb_mkimg "$T/A.img" 64M
vb_mkimg "$T/B.img" 64M
vbmgr create r1 --driver raid1 --start "$T/A.img" "$T/B.img"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
dd if="$T/X" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none
vbmgr stop r1
cp "$T/A.img" "$T/A.snap"
snap_events=$(vbmgr examine --json "$T/A.snap" | jq .events)
vbmgr start r1
dd if="$T/Y" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none
# two sweeps of 5 s: the bits of Y's writes are cleared while the device
# runs, and the superblocks said so first
sleep 12
cleared=$(vbmgr examine --json "$T/B.img" | jq .events_cleared)
[ "$cleared" != null ] && [ "$cleared" -gt "$snap_events" ] ||
  vb_fail "events_cleared ($cleared) is not above the copy's events ($snap_events)"
vbmgr stop r1
cp "$T/A.snap" "$T/A.img"
vbmgr start r1
grep -q "component 0 ($T/A.img).*bitmap's events_cleared.*rebuilding it in full" "$VB_LOG" ||
  vb_fail "the log does not say why A is rebuilt in full"
check_reads "$(vb_blockdev_of r1)" "$T/Y"
vbmgr wait r1 > /dev/null || vb_fail "rebuild of the stale copy"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "r1" and .operation == "rebuild")] | last')
vb_assert_eq "$size" "$(jq -r .bytes <<< "$job")" "the stale copy is rebuilt in full"
vb_assert_eq "in-sync in-sync" "$(vb_json r1 '[.components[].state] | join(" ")')" "states after the rebuild"
check_reads "$(vb_blockdev_of r1)" "$T/Y"
vbmgr stop r1
legs_equal "$T/A.img" "$T/B.img"
vbmgr delete r1

vb_log "a copy of a leg taken while the device ran (events equal then)"
vb_mkimg "$T/A.img" 64M
vb_mkimg "$T/B.img" 64M
vbmgr create r2 --driver raid1 --start "$T/A.img" "$T/B.img"
vbmgr wait r2 > /dev/null || vb_fail "initial resync"
dd if="$T/X" of="$(vb_blockdev_of r2)" bs=1M oflag=direct status=none
# idle: every write has reached both legs
cp "$T/A.img" "$T/A.snap"
vb_assert_eq "$(vbmgr examine --json "$T/B.img" | jq .events)" \
  "$(vbmgr examine --json "$T/A.snap" | jq .events)" "events of the copy and of the device"
dd if="$T/Y" of="$(vb_blockdev_of r2)" bs=1M oflag=direct status=none
# the clean stop clears the bits of Y's writes
vbmgr stop r2
cp "$T/A.snap" "$T/A.img"
vbmgr start r2
check_reads "$(vb_blockdev_of r2)" "$T/Y"
vbmgr wait r2 > /dev/null || vb_fail "rebuild of the stale copy"
check_reads "$(vb_blockdev_of r2)" "$T/Y"
vbmgr stop r2
legs_equal "$T/A.img" "$T/B.img"
vbmgr delete r2

vb_log "split brain: each leg ran alone; the one that ran without the newest is rebuilt in full"
vb_mkimg "$T/A.img" 64M
vb_mkimg "$T/B.img" 64M
vbmgr create r3 --driver raid1 --attr bitmap_chunk=1M --start "$T/A.img" "$T/B.img"
vbmgr wait r3 > /dev/null || vb_fail "initial resync"
dd if="$T/X" of="$(vb_blockdev_of r3)" bs=1M oflag=direct status=none
vbmgr stop r3
cp "$T/X" "$T/expected"
mv "$T/B.img" "$T/B.away"
vbmgr start r3
# A alone writes 2..4 MiB, stops; then B alone writes 8..10 MiB (twice: its
# superblock ends up the newest)
dd if="$T/Y" of="$(vb_blockdev_of r3)" bs=1M seek=2 skip=2 count=2 oflag=direct status=none
vbmgr stop r3
mv "$T/A.img" "$T/A.away"
mv "$T/B.away" "$T/B.img"
vbmgr start r3
dd if="$T/Y" of="$(vb_blockdev_of r3)" bs=1M seek=8 skip=8 count=2 oflag=direct status=none
vbmgr stop r3
vbmgr start r3
vbmgr stop r3
dd if="$T/Y" of="$T/expected" bs=1M seek=8 skip=8 count=2 conv=notrunc status=none
mv "$T/A.away" "$T/A.img"
a_events=$(vbmgr examine --json "$T/A.img" | jq .events)
b_events=$(vbmgr examine --json "$T/B.img" | jq .events)
[ "$b_events" -gt "$a_events" ] || vb_fail "B ($b_events) should be newer than A ($a_events)"
vb_assert_eq missing "$(vbmgr examine --json "$T/A.img" | jq -r '.roles[1].state')" "A ran without B"
vbmgr start r3
grep -q "component 0 ($T/A.img).*diverged" "$VB_LOG" || vb_fail "the log does not say A diverged"
check_reads "$(vb_blockdev_of r3)" "$T/expected"
vbmgr wait r3 > /dev/null || vb_fail "rebuild of the diverged leg"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "r3" and .operation == "rebuild")] | last')
vb_assert_eq "$size" "$(jq -r .bytes <<< "$job")" "the diverged leg is rebuilt in full"
check_reads "$(vb_blockdev_of r3)" "$T/expected"
vbmgr stop r3
legs_equal "$T/A.img" "$T/B.img"
vbmgr delete r3
vb_stop_daemon
