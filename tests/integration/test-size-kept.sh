#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Larger components never grow a device by themselves (md's rule: growing
# is the administrator's decision). Found by the torture test (seed 2,
# raid10, 120-s runs): larger disks beside a failed slot grew the device at
# a start, and the spare that then took the slot — the size the data had
# been — could not hold its copy (ENOSPC in its rebuild, the slot failed
# again). With every slot in sync the growth was no better: a linear
# appending the grown device would find its own layout shifted under its
# data (what was the second component's start now reads the first one's
# new space).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

for f in a b c; do vb_mkimg "$T/$f.img" 64M; done
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
size=$(vb_json r1 .size)
head -c $((32 << 20)) /dev/urandom > "$T/expected"
dd if="$T/expected" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none
vbmgr fail r1 "$T/b.img"
vb_wait_state r1 degraded 10
vbmgr stop r1

vb_log "a.img and the failed b.img grow; c.img stays 64M and becomes a spare"
truncate -s 96M "$T/a.img" "$T/b.img"
vbmgr add r1 "$T/c.img" --spare
vbmgr start r1
vbmgr wait r1 > /dev/null || vb_fail "rebuild onto the spare: $(vbmgr show r1)"
vb_assert_eq "$size" "$(vb_json r1 .size)" "size with a slot out"
vb_assert_eq "$size" "$(blockdev --getsize64 "$(vb_blockdev_of r1)")" "node size with a slot out"
vb_assert_eq "in-sync in-sync" \
  "$(vb_json r1 '[.components[] | select(.role != "faulty") | .state] | join(" ")')" \
  "the spare took the failed slot and is in sync"
vb_assert_eq 0 "$(vb_json r1 "[.components[] | select(.source == \"$T/c.img\") | .errors] | add")" \
  "errors of the spare"
cmp -n $((32 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "data differs"

vb_log "legs all larger than the device: a leg of the device's own size may replace one"
# (found by the torture test, seed 2721284830: the check compared the new
# legs with what the old legs could hold, not with the device's size)
vbmgr remove r1 "$T/b.img"
vb_mkimg "$T/d.img" 96M
vbmgr reconfigure r1 --remove "$T/c.img" --add "$T/d.img"
vbmgr wait r1 > /dev/null || vb_fail "rebuild onto d.img: $(vbmgr show r1)"
vb_mkimg "$T/e.img" 64M
vbmgr reconfigure r1 --remove "$T/d.img" --add "$T/e.img" ||
  vb_fail "a leg of the device's size refused beside larger legs"
vbmgr wait r1 > /dev/null || vb_fail "rebuild onto e.img: $(vbmgr show r1)"
vb_assert_eq "$size" "$(vb_json r1 .size)" "size after the legs changed"
cmp -n $((32 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "data differs after the legs changed"
vb_mkimg "$T/small.img" 32M
vb_snapshot
vb_expect_fail WouldLoseData vbmgr reconfigure r1 --remove "$T/e.img" --add "$T/small.img"
vb_assert_contains "$VB_ERR" "would be cut off; nothing changed" "a leg smaller than the device"
vb_assert_unchanged "a refused reconfigure"
vbmgr stop r1
vbmgr delete r1

vb_log "a linear appending a raid1 whose legs all grow: its data stays where it was"
for f in a b; do vb_mkimg "$T/$f.img" 64M; done
vb_mkimg "$T/tail.img" 32M
vbmgr create m --driver raid1 --start "$T/a.img" "$T/b.img"
vbmgr wait m > /dev/null || vb_fail "initial resync of m"
msize=$(vb_json m .size)
vbmgr create lin --driver linear --start vblk:m "$T/tail.img"
lsize=$(vb_json lin .size)
head -c "$lsize" /dev/urandom > "$T/lin-expected"
dd if="$T/lin-expected" of="$(vb_blockdev_of lin)" bs=1M oflag=direct status=none
vbmgr stop lin
vbmgr stop m
truncate -s 96M "$T/a.img" "$T/b.img"
vbmgr start m
vbmgr wait m > /dev/null || vb_fail "m after its legs grew"
vb_assert_eq "$msize" "$(vb_json m .size)" "m's size after its legs grew"
vbmgr start lin
vb_assert_eq "$lsize" "$(vb_json lin .size)" "the linear's size"
cmp "$T/lin-expected" "$(vb_blockdev_of lin)" || vb_fail "the linear's data moved"
vbmgr stop lin
vbmgr stop m
vb_log "the linear started with its raid1 in one go"
vbmgr start lin
vb_assert_eq active "$(vb_state_of m)" "m started as lin's dependency"
vb_assert_eq "$lsize" "$(vb_json lin .size)" "the linear's size, started with m"
cmp "$T/lin-expected" "$(vb_blockdev_of lin)" || vb_fail "the linear's data moved (started with m)"
vbmgr stop lin
vbmgr stop m
vbmgr delete lin
vbmgr delete m

vb_log "a failed slot whose number a smaller disk took is kept by a reconfiguration"
# (found by the torture test, seed 2950652206 at 120 s, step 59: the
# device's old size was taken from what its configuration held, the smaller
# disk at the failed slot's path included, and the new leg refused)
for f in a b c; do vb_mkimg "$T/$f.img" 64M; done
vb_mkimg "$T/little.img" 32M
la=$(losetup --show -f "$T/a.img")
lb=$(losetup --show -f "$T/b.img")
lc=$(losetup --show -f "$T/c.img")
vbmgr create k --driver raid1 --start "$la" "$lb"
vbmgr wait k > /dev/null || vb_fail "initial resync of k"
ksize=$(vb_json k .size)
head -c $((32 << 20)) /dev/urandom > "$T/k-expected"
dd if="$T/k-expected" of="$(vb_blockdev_of k)" bs=1M oflag=direct status=none
losetup -d "$lb"
vb_wait_until 10 eval '[ "$(vb_json k ".components[1].state")" = missing ]' ||
  vb_fail "b is not shown gone: $(vbmgr show k)"
vb_wait_until 10 bash -c "! losetup '$lb' > /dev/null 2>&1"
losetup "$lb" "$T/little.img"
udevadm settle
vbmgr reconfigure k --add "$lc" ||
  vb_fail "a reconfiguration keeping the failed slot (a smaller disk at its path) refused"
vb_wait_jobs k || vb_fail "rebuild onto c: $(vbmgr show k)"
vb_assert_eq "$ksize" "$(vb_json k .size)" "k's size after the reconfiguration"
kstates=$(vb_json k '[.components[].state] | join(" ")')
[[ $kstates =~ ^in-sync\ (missing|faulty)\ in-sync$ ]] ||
  vb_fail "k's legs after the reconfiguration: $kstates"
cmp -n $((32 << 20)) "$T/k-expected" "$(vb_blockdev_of k)" || vb_fail "k's data differs"
cmp -n $((2 << 20)) "$T/little.img" /dev/zero || vb_fail "the smaller disk at b's path was written"
vbmgr stop k
vbmgr delete k
vb_stop_daemon
