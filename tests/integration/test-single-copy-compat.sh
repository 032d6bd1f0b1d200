#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Compatibility, data first (issue 15 H): a raid0 and a linear in a
# state.json written before these drivers carried superblocks — no
# "metadata" attribute, their data from byte 0 of each component — stay
# metadata=none under this vblkd: they start with their data where it
# was, nothing but data is ever written to their components, and the
# state saved again says metadata=none. Conversions that keep the data in
# place keep no superblock either (a file made a linear by reconfigure);
# a linear with superblocks grown by a component writes the new one's
# superblock and the new role table, and copies nothing.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

vb_log "images holding data from byte 0, as the old layout put it"
for f in z0 z1; do vb_mkimg "$T/$f.img" 32M; done
vb_mkimg "$T/l0.img" 24M
vb_mkimg "$T/l1.img" 16M
for f in z0 z1 l0 l1; do
  dd if=/dev/urandom of="$T/$f.img" bs=1M count=$(($(stat -c %s "$T/$f.img") >> 20)) conv=notrunc status=none
done
# raid0 with 1 MiB chunks: chunk k of the device is chunk k/2 of component k%2
for ((k = 0; k < 64; k++)); do
  dd if="$T/z$((k % 2)).img" bs=1M skip=$((k / 2)) count=1 status=none
done > "$T/expect-r0"
cat "$T/l0.img" "$T/l1.img" > "$T/expect-lin"
image_sums () { sha256sum "$T"/z0.img "$T"/z1.img "$T"/l0.img "$T"/l1.img; }
images_before=$(image_sums)

mkdir -p "$VB_STATE_DIR"
cat > "$VB_STATE_FILE" << EOF
{
  "version": 1,
  "devices": [
    {
      "name": "old0",
      "uuid": "5d7a1a52-3b1e-4c55-9a0e-6f1b2c3d4e01",
      "driver": "raid0",
      "backend": "loop",
      "attributes": { "chunk_size": "1048576" },
      "components": [
        { "source": "$T/z0.img", "role": "0", "uuid": "5d7a1a52-3b1e-4c55-9a0e-6f1b2c3d4e02" },
        { "source": "$T/z1.img", "role": "1", "uuid": "5d7a1a52-3b1e-4c55-9a0e-6f1b2c3d4e03" }
      ],
      "exports": [],
      "autostart": true,
      "started": true
    },
    {
      "name": "oldl",
      "uuid": "5d7a1a52-3b1e-4c55-9a0e-6f1b2c3d4e11",
      "driver": "linear",
      "backend": "loop",
      "attributes": {},
      "components": [
        { "source": "$T/l0.img", "role": "0", "uuid": "5d7a1a52-3b1e-4c55-9a0e-6f1b2c3d4e12" },
        { "source": "$T/l1.img", "role": "1", "uuid": "5d7a1a52-3b1e-4c55-9a0e-6f1b2c3d4e13" }
      ],
      "exports": [],
      "autostart": true,
      "started": true
    }
  ]
}
EOF

vb_log "vblkd with this code starts them with their data where it was"
vb_start_daemon
# data_of NAME — the sha256 of the device's whole node
data_of () { sha256sum < "$(vb_blockdev_of "$1")"; }
check_old () {
  vb_wait_state old0 active 20
  vb_wait_state oldl active 20
  vb_assert_eq none "$(vb_json old0 .attributes.metadata)" "old raid0's metadata $1"
  vb_assert_eq none "$(vb_json oldl .attributes.metadata)" "old linear's metadata $1"
  vb_assert_eq $((64 << 20)) "$(vb_json old0 .size)" "old raid0's size $1"
  vb_assert_eq $((40 << 20)) "$(vb_json oldl .size)" "old linear's size $1"
  vb_assert_eq "$(sha256sum < "$T/expect-r0")" "$(data_of old0)" "old raid0's data $1"
  vb_assert_eq "$(sha256sum < "$T/expect-lin")" "$(data_of oldl)" "old linear's data $1"
}
check_old "at the first start"

vb_log "stopped, started, vblkd restarted: still none, nothing written but data"
vbmgr stop old0
vbmgr stop oldl
vb_assert_eq "$images_before" "$(image_sums)" "the components after a start and a stop"
vbmgr start old0
vbmgr start oldl
vb_stop_daemon
for d in old0 oldl; do
  vb_assert_eq none "$(vb_state | jq -r --arg n "$d" '.devices[] | select(.name == $n) | .attributes.metadata')" \
    "$d's metadata as saved again"
done
vb_start_daemon
check_old "after vblkd started again"
vbmgr stop old0
vbmgr stop oldl
vb_assert_eq "$images_before" "$(image_sums)" "the components in the end"

vb_log "file -> linear by reconfigure: the data stays at byte 0, no superblock"
vb_mkimg "$T/f.img" 16M
vb_mkimg "$T/g.img" 16M
vbmgr create f --driver file --attr engine=true --backend loop --start "$T/f.img"
dd if=/dev/urandom of="$(vb_blockdev_of f)" bs=1M count=16 oflag=direct status=none
f_sum=$(data_of f)
vb_expect_fail NotSupported vbmgr reconfigure f --driver linear --attr metadata=vblk --add "$T/g.img"
vb_assert_contains "$VB_ERR" "metadata=none" "reconfigure to a linear with superblocks"
vbmgr reconfigure f --driver linear --add "$T/g.img"
vb_assert_eq none "$(vb_json f .attributes.metadata)" "the linear made from a file"
vb_assert_eq "$f_sum" "$(head -c $((16 << 20)) "$(vb_blockdev_of f)" | sha256sum)" "its data"
vbmgr stop f
vb_assert_eq "$f_sum" "$(sha256sum < "$T/f.img")" "f.img holds the data from byte 0"
if vbmgr examine "$T/g.img" > /dev/null 2>&1; then vb_fail "g.img got a superblock"; fi

vb_log "linear with superblocks grown by a component: its superblock and the new role table"
vb_mkimg "$T/h0.img" 16M
vb_mkimg "$T/h1.img" 8M
vbmgr create lv --driver linear --backend loop --start "$T/h0.img"
vb_assert_eq vblk "$(vb_json lv .attributes.metadata)" "a new linear"
dd if=/dev/urandom of="$(vb_blockdev_of lv)" bs=1M count=15 oflag=direct status=none
lv_sum=$(data_of lv)
vbmgr reconfigure lv --add "$T/h1.img"
vb_assert_eq $(((15 + 7) << 20)) "$(vb_json lv .size)" "the grown linear's size"
vb_assert_eq "$lv_sum" "$(head -c $((15 << 20)) "$(vb_blockdev_of lv)" | sha256sum)" "its data"
vb_assert_eq "" "$(vbmgr jobs --json | jq -r '.[] | select(.device == "lv" and .operation != "start" and .operation != "reconfigure") | .operation')" "copy jobs of the grown linear"
h1=$(vbmgr examine --json "$T/h1.img") || vb_fail "h1.img has no superblock"
vb_assert_eq "lv 1 2" "$(jq -r '"\(.device_name) \(.role) \(.n_roles)"' <<< "$h1")" "h1.img's superblock"
h0=$(vbmgr examine --json "$T/h0.img")
vb_assert_eq "2 $(jq -r .events <<< "$h1")" "$(jq -r '"\(.n_roles) \(.events)"' <<< "$h0")" "h0.img's role table"
vbmgr stop lv
vbmgr start lv
vb_assert_eq "$lv_sum" "$(head -c $((15 << 20)) "$(vb_blockdev_of lv)" | sha256sum)" "its data after a stop and a start"
vbmgr stop lv
vb_stop_daemon
