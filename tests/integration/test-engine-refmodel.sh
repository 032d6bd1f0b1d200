#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every engine driver, served as a block node (FUSE file + loop with direct
# I/O), passes the reference-model test: random reads, writes (some FUA),
# flushes, discards and write-zeroes across chunk and component boundaries,
# every read compared with the model. Also an engine device stacked on an
# engine device (called in process).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

mk () { local f; for f in "$@"; do vb_mkimg "$T/$f.img" "${SIZE:-48M}"; done; }
refmodel () {
  local name=$1 chunk=$2 out
  out=$("$VB_REFMODEL" --device "$(vb_blockdev_of "$name")" --ops "${OPS:-1500}" \
        --chunk "$chunk" --seed "$RANDOM") || vb_fail "$name: reference model: $out"
  vb_log "$name: $out"
}

mk l0 l1; SIZE=20M mk l2
vbmgr create lin --driver linear --start "$T/l0.img" "$T/l1.img" "$T/l2.img"
# metadata=vblk (the default, raid0 and linear too): each component gives 1 MiB less
vb_assert_eq $(((47 + 47 + 19) << 20)) "$(vb_json lin .size)" "linear size"
vb_assert_eq $(((47 + 47 + 19) << 20)) "$(blockdev --getsize64 "$(vb_blockdev_of lin)")" "linear node size"
refmodel lin $((47 << 20))

mk a0 a1 a2
vbmgr create r0 --driver raid0 --attr chunk_size=64K --start "$T/a0.img" "$T/a1.img" "$T/a2.img"
vb_assert_eq $((3 * (47 << 20))) "$(vb_json r0 .size)" "raid0 size"
refmodel r0 65536

vb_log "raid0 and linear without superblocks: the whole components"
SIZE=16M mk n0 n1
vbmgr create r0n --driver raid0 --attr chunk_size=64K --attr metadata=none --start "$T/n0.img" "$T/n1.img"
vb_assert_eq $((2 * (16 << 20))) "$(vb_json r0n .size)" "raid0 size, metadata=none"
refmodel r0n 65536
vbmgr stop r0n
vbmgr delete r0n
vbmgr create linn --driver linear --attr metadata=none --start "$T/n0.img" "$T/n1.img"
vb_assert_eq $((2 * (16 << 20))) "$(vb_json linn .size)" "linear size, metadata=none"
refmodel linn $((16 << 20))
vbmgr stop linn
vbmgr delete linn

mk m0 m1
vbmgr create r1 --driver raid1 --start "$T/m0.img" "$T/m1.img"
# metadata=vblk (the default): superblock and bitmap in the first MiB
vb_assert_eq $((47 << 20)) "$(vb_json r1 .size)" "raid1 size"
refmodel r1 1048576
vbmgr wait r1 >/dev/null || vb_fail "raid1: initial resync did not finish"
vbmgr stop r1
cmp -i 1M "$T/m0.img" "$T/m1.img" || vb_fail "raid1 copies differ after the run"

mk t0 t1 t2
vbmgr create r10 --driver raid10 --attr chunk_size=64K --attr copies=2 --start \
  "$T/t0.img" "$T/t1.img" "$T/t2.img"
vb_assert_eq $((3 * (47 << 20) / 2)) "$(vb_json r10 .size)" "raid10 size"
refmodel r10 65536

vb_log "raid1 over a fresh raid0 device: engine on engine, in process"
SIZE=16M mk b0 b1 s0
vbmgr create base --driver raid0 --attr chunk_size=64K "$T/b0.img" "$T/b1.img"
vbmgr create stack --driver raid1 --start vblk:base "$T/s0.img"
vb_assert_eq active "$(vb_state_of base)" "state of base, started for stack"
refmodel stack 65536
vb_assert_eq "stack" "$(vb_json base '.dependents | join(",")')" "dependents of base"
vbmgr stop base --recursive

vbmgr stop r0
vbmgr stop lin
vbmgr stop r10
vb_assert_eq "" "$(losetup -l -n -O BACK-FILE | grep "$VB_RUN_DIR" || true)" "loop devices left"
vb_assert_eq "" "$(grep " $VB_RUN_DIR/" /proc/self/mounts || true)" "FUSE mounts left"
vb_stop_daemon
