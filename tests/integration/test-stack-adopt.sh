#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A stack comes back from its disks (DESIGN.md, issue 15 H): a raid0 over
# two raid1 and a linear over the raid0 and a file, every level with its
# superblocks (raid0's and linear's by default now), on the engine over
# loop. Data with a known checksum; everything stopped, state.json lost;
# `vbmgr scan --adopt --start` over the bottom image files brings back
# every level — names, UUIDs, drivers, attributes, components (a level on
# a device as vblk:NAME) — with its data. Without --start the lowest level
# is adopted and the result says what is left to do; doing it brings the
# rest. Loop devices over the images, found by the default scan, do too.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

images=()
for f in a0 a1 b0 b1 f; do
  vb_mkimg "$T/$f.img" 40M
  images+=("$T/$f.img")
done
devices=(r1a r1b r0 top)

vbmgr create r1a --driver raid1 --backend loop --attr bitmap_chunk=1M "$T/a0.img" "$T/a1.img"
vbmgr create r1b --driver raid1 --backend loop --attr bitmap_chunk=1M "$T/b0.img" "$T/b1.img"
vbmgr create r0 --driver raid0 --backend loop --attr chunk_size=64K vblk:r1a vblk:r1b
vbmgr create top --driver linear --backend loop --start vblk:r0 "$T/f.img"
vb_assert_eq vblk "$(vb_json r0 .attributes.metadata)" "a new raid0's metadata"
vb_assert_eq vblk "$(vb_json top .attributes.metadata)" "a new linear's metadata"
vbmgr wait r1a > /dev/null || vb_fail "resync of r1a"
vbmgr wait r1b > /dev/null || vb_fail "resync of r1b"
# r1a, r1b: 39 MiB of data each; r0: 2 x 38 MiB; top: 75 + 39 MiB
vb_assert_eq $(((75 + 39) << 20)) "$(vb_json top .size)" "top's size"

# what each device is, as `vbmgr show` says it
describe () {
  vb_json "$1" '"\(.name) \(.uuid) \(.driver) \(.backend) \(.attributes | tostring) \([.components[] | "\(.role):\(.source)"] | join(","))"'
}
declare -A before
for d in "${devices[@]}"; do before[$d]=$(describe "$d"); done
vb_assert_contains "${before[top]}" "0:vblk:r0,1:$T/f.img" "top's components"

dd if=/dev/urandom of="$T/data" bs=1M count=110 status=none
dd if="$T/data" of="$(vb_blockdev_of top)" bs=1M oflag=direct status=none
sum=$(head -c $((110 << 20)) "$(vb_blockdev_of top)" | sha256sum)
vb_assert_eq "$(sha256sum < "$T/data")" "$sum" "top's data as written"

# lose_state — stop every level, stop vblkd, delete state.json, start vblkd
lose_state () {
  for d in top r0 r1a r1b; do vbmgr stop "$d"; done
  vb_stop_daemon
  rm -f "$VB_STATE_FILE" "$VB_STATE_JOURNAL"
  vb_start_daemon
  vb_assert_eq "[]" "$(vbmgr list --json | jq -c .)" "devices after losing state.json"
}
# back WHAT — every level is there again, as it was, running, with its data
back () {
  local d
  for d in "${devices[@]}"; do
    vb_wait_state "$d" active 30
    vb_assert_eq "${before[$d]}" "$(describe "$d")" "$d $1"
  done
  vb_assert_eq "$sum" "$(head -c $((110 << 20)) "$(vb_blockdev_of top)" | sha256sum)" "top's data $1"
}

vb_log "state.json lost; scan --adopt --start over the bottom files brings back every level"
lose_state
# the file under top carries top's superblock, slot 1, stopped clean
examine=$(vbmgr examine --json "$T/f.img") || vb_fail "vbmgr examine f.img"
vb_assert_eq "top linear 1 true" "$(jq -r '"\(.device_name) \(.driver) \(.role) \(.clean)"' <<< "$examine")" "f.img's superblock"
out=$(vbmgr scan --adopt --start --json "${images[@]}") || vb_fail "scan --adopt --start"
for d in "${devices[@]}"; do
  vb_assert_eq "true false" "$(jq -r --arg n "$d" '.[] | select(.name == $n) | "\(.adopted) \(.known)"' <<< "$out")" "$d in the scan's result"
done
back "after scan --adopt --start"
vb_state | jq -e '.devices | length == 4' > /dev/null || vb_fail "state.json holds the four"

vb_log "without --start: the lowest level is adopted, and the result says the rest needs it started"
lose_state
out=$(vbmgr scan --adopt --json "${images[@]}") || vb_fail "scan --adopt"
for d in r1a r1b; do
  vb_assert_eq "true" "$(jq -r --arg n "$d" '.[] | select(.name == $n) | .adopted' <<< "$out")" "$d adopted"
  vb_assert_contains "$(jq -r --arg n "$d" '.[] | select(.name == $n) | .note' <<< "$out")" "once it runs" "$d's note"
done
vb_assert_eq "" "$(jq -r '.[] | select(.name == "r0") | .name' <<< "$out")" "r0 not found yet"
vb_assert_eq "false" "$(jq -r '.[] | select(.name == "top") | .adopted' <<< "$out")" "top not adopted yet"
text=$(vbmgr scan "${images[@]}") || vb_fail "scan (text)"
vbmgr start r1a
vbmgr start r1b
out=$(vbmgr scan --adopt --start --json "${images[@]}") || vb_fail "scan --adopt --start, lower level started"
vb_assert_eq "false true" "$(jq -r '.[] | select(.name == "r1a") | "\(.adopted) \(.known)"' <<< "$out")" "r1a known"
vb_assert_eq "true true" "$(jq -r '[.[] | select(.name == "r0" or .name == "top") | .adopted] | "\(.[0]) \(.[1])"' <<< "$out")" "r0 and top adopted"
back "after scan --adopt, start, scan --adopt --start"

vb_log "loop devices over the images: the default scan finds every level"
lose_state
loops=()
for img in "${images[@]}"; do loops+=("$(losetup --find --show "$img")"); done
out=$(vbmgr scan --adopt --start --json) || vb_fail "default scan --adopt --start"
vb_assert_eq "${loops[0]}" "$(vb_json r1a '.components[0].source')" "r1a's first leg, found on its loop device"
vb_assert_eq "vblk:r1a" "$(vb_json r0 '.components[0].source')" "r0's first component"
vb_assert_eq "${loops[4]}" "$(vb_json top '.components[1].source')" "top's file, on its loop device"
vb_assert_eq "$sum" "$(head -c $((110 << 20)) "$(vb_blockdev_of top)" | sha256sum)" "top's data found on loop devices"
for d in top r0 r1a r1b; do vbmgr stop "$d"; done
for l in "${loops[@]}"; do losetup -d "$l"; done
vb_stop_daemon
